package scheduler

import "time"

// NextRun is when the import's schedule next starts a run after now;
// ok is false for a paused or API-only import.
func NextRun(e Entry, now time.Time) (t time.Time, ok bool) {
	if e.Paused() {
		return time.Time{}, false
	}
	sched, _, err := parseSchedule(e.Schedule())
	if err != nil || sched == nil {
		return time.Time{}, false
	}
	return sched.Next(now), true
}
