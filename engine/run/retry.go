package run

import "time"

// Retry is one transient source error a run recovered from by retrying:
// the run's history shows each, so a slow or flaky source is visible even
// when the run succeeded.
type Retry struct {
	At time.Time
	// Error reads as a failed run's reason does (connectors keep
	// credentials out of their errors).
	Error string
}

// retried counts a retry and keeps its cause (the first maxFailures).
func (s *Stats) retried(at time.Time, err error) {
	s.Retries++
	if len(s.RetryLog) < maxFailures {
		s.RetryLog = append(s.RetryLog, Retry{At: at, Error: err.Error()})
	}
}
