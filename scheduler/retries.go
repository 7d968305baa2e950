package scheduler

import (
	"bytes"
	"encoding/json"

	"github.com/tributary-dev/tributary/engine/run"
)

// A run's retries ride its Failures column (store.Run.Failures), so both
// stores keep them with no schema change: a run that never retried keeps
// the plain JSON array of failures every reader knows; one that retried
// holds {"failures": [...], "retries": [{"at", "error"}]}.

// RetryView is one retry of a run as the history shows it: when (unix
// seconds) and the transient source error that was retried.
type RetryView struct {
	At    int64  `json:"at"`
	Error string `json:"error"`
}

type runLog struct {
	Failures json.RawMessage `json:"failures"`
	Retries  []RetryView     `json:"retries"`
}

// RetryViews converts a run's live retry causes.
func RetryViews(rs []run.Retry) []RetryView {
	out := make([]RetryView, len(rs))
	for i, r := range rs {
		out[i] = RetryView{At: r.At.Unix(), Error: r.Error}
	}
	return out
}

// withRetries wraps a run's failures array with its retries, if any.
func withRetries(failures []byte, rs []run.Retry) []byte {
	if len(rs) == 0 {
		return failures
	}
	b, _ := json.Marshal(runLog{Failures: failures, Retries: RetryViews(rs)}) // plain structs: cannot fail
	return b
}

// SplitFailures reads a run's Failures column: its failures (a JSON array)
// and its retries (never nil).
func SplitFailures(b []byte) (json.RawMessage, []RetryView) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var l runLog
		if err := json.Unmarshal(t, &l); err == nil {
			if l.Retries == nil {
				l.Retries = []RetryView{}
			}
			return l.Failures, l.Retries
		}
	}
	return b, []RetryView{}
}
