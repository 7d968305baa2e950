package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Monitor watches runs for the alert rules (scheduler/alerts): it sees a
// run's plan before anything is written, and turns its end into alerts
// and rule states that commit with the end (store.Alerts.EndRun).
type Monitor interface {
	Watch(ctx context.Context, im *importspec.Import, r store.Run) RunWatch
}

// RunWatch is one run's monitor.
type RunWatch interface {
	// Preflight may refuse the run before it writes (run.Options.Preflight).
	Preflight(ctx context.Context, p run.Plan) error
	// End returns the run's end with its alerts and rule states.
	End(ctx context.Context, r store.Run, st run.Stats) store.RunEnd
}

// saveEnd stores a run's end: with its alerts when a monitor watches it.
func (s *Scheduler) saveEnd(ctx context.Context, w RunWatch, r store.Run, st run.Stats) error {
	if w == nil {
		return s.opt.Store.UpdateRun(ctx, r)
	}
	return s.opt.Store.EndRun(ctx, w.End(ctx, r, st))
}

// heldStatus is the end of a run a preflight refused: cancelled, not
// failed (the source is fine; a rule stopped it), with the rule's reason.
func heldStatus(err error) (string, string, bool) {
	if !errors.Is(err, run.ErrHeld) {
		return "", "", false
	}
	return store.RunCancelled, fmt.Sprintf("held before writing: %v", err), true
}

// Pause pauses an import for reason (a monitoring rule's), durably; the
// app API shows the reason until PATCH paused:false resumes the import.
func (c *Catalog) Pause(ctx context.Context, project int64, id, reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{project, id}
	d, err := c.docOf(k)
	if err != nil {
		return err
	}
	paused := true
	d.Paused, d.PausedReason = &paused, reason
	_, err = c.save(ctx, k, d)
	return err
}
