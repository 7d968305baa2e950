package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Usage counts, per project, the events each source stored in each calendar
// month (UTC) of ingestion: the basis of a project's monthly usage. A store
// counts an event when it stores it, in the same commit, so a counter never
// includes a duplicate, never misses a stored event and survives crashes
// and restarts exactly as the events do.
type Usage interface {
	// Usage returns a project's counters, newest month first, then by
	// source; a project that stored nothing has none.
	Usage(ctx context.Context, project int64) ([]UsageRow, error)
	// DailyUsage returns a project's counters per UTC day of ingestion
	// from fromDay (YYYY-MM-DD) on, oldest day first, then by source
	// (usage_daily.go).
	DailyUsage(ctx context.Context, project int64, fromDay string) ([]DailyUsageRow, error)
}

// UsageRow is one counter.
type UsageRow struct {
	Month  string // "YYYY-MM", UTC
	Source string // one of the Source* names
	Events int64
}

// The sources a Batch names (Batch.Source). They are label values in
// /metrics and keys in the usage API, so they are a small fixed set.
const (
	SourceImport    = "import"           // POST /import
	SourceTrack     = "track"            // /track and its legacy encodings
	SourceWarehouse = "warehouse-import" // warehouse sync runs (engine/run)
	SourceAmplitude = "amplitude"        // the Amplitude migration
	// SourceOther counts batches that name no source (tools, tests), so
	// that every stored event is in some counter.
	SourceOther = "other"
)

// UsageSource is the counter name of a batch's source.
func UsageSource(s string) string {
	if s == "" {
		return SourceOther
	}
	return s
}

// UsageKey names one counter.
type UsageKey struct {
	Project int64
	Month   string
	Source  string
}

// UsageTally adds up stored events by counter for one write. An event
// counts in the day (and so the month) of its IngestMs (when the server
// accepted it); an event without one, in the day of the write (NowMs).
// Consecutive events of one counter, the usual case, cost two comparisons
// each.
type UsageTally struct {
	NowMs  int64
	counts map[DayKey]int64

	last    DayKey
	pending int64
	lo, hi  int64 // [lo, hi) ms of last.Day
}

// Add counts n events of project and source ingested at ingestMs.
func (t *UsageTally) Add(project int64, source string, ingestMs, n int64) {
	if ingestMs <= 0 {
		ingestMs = t.NowMs
	}
	if t.pending > 0 && project == t.last.Project && source == t.last.Source && ingestMs >= t.lo && ingestMs < t.hi {
		t.pending += n
		return
	}
	t.flush()
	d := time.UnixMilli(ingestMs).UTC()
	start := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
	t.lo, t.hi = start.UnixMilli(), start.AddDate(0, 0, 1).UnixMilli()
	t.last = DayKey{Project: project, Day: start.Format(time.DateOnly), Source: source}
	t.pending = n
}

func (t *UsageTally) flush() {
	if t.pending == 0 {
		return
	}
	if t.counts == nil {
		t.counts = map[DayKey]int64{}
	}
	t.counts[t.last] += t.pending
	t.pending = 0
}

// Counts returns the totals so far, in key order (project, month, source),
// the order in which a store takes counter row locks, so that concurrent
// writes cannot deadlock on them.
func (t *UsageTally) Counts() []UsageCount {
	t.flush()
	out := make([]UsageCount, 0, len(t.counts))
	for k, n := range t.counts {
		// A write spans a day or two: a scan beats a map here.
		mk := UsageKey{Project: k.Project, Month: k.Day[:7], Source: k.Source}
		if i := slices.IndexFunc(out, func(c UsageCount) bool { return c.UsageKey == mk }); i >= 0 {
			out[i].Events += n
		} else {
			out = append(out, UsageCount{mk, n})
		}
	}
	slices.SortFunc(out, func(a, b UsageCount) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Month, b.Month), cmp.Compare(a.Source, b.Source))
	})
	return out
}

// Reset empties the tally for reuse, keeping its map.
func (t *UsageTally) Reset(nowMs int64) {
	clear(t.counts)
	t.pending, t.NowMs = 0, nowMs
}

// UsageCount is one counter's increment.
type UsageCount struct {
	UsageKey
	Events int64
}

// SortUsage orders rows as Usage returns them: newest month first, then
// by source.
func SortUsage(rows []UsageRow) {
	slices.SortFunc(rows, func(a, b UsageRow) int {
		return cmp.Or(cmp.Compare(b.Month, a.Month), cmp.Compare(a.Source, b.Source))
	})
}
