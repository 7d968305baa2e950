package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// Run leases let several processes share one store with no other
// coordinator. Each run this process starts names it as owner with a lease
// of Options.Lease; a loop renews the leases of its runs every RenewEvery.
// Every process looks for lapsed leases every Lease/2 (and once at Start):
// the store marks such a run FAILED for exactly one of the processes
// asking, which starts a recovery run of the import. That run resumes from
// the last committed checkpoint, since checkpoints commit with the records
// they cover. Its period "resume:<old run>" keeps StartRun's period rule
// from joining it to anything but another resume of the same run.

// TriggerRecovery marks a run that resumes one whose process died.
const TriggerRecovery = "recovery"

// Interruption reasons.
const (
	reasonStopped = "interrupted: the server stopped during the run"
	reasonExpired = "interrupted: lease expired"
)

// leaseState is the scheduler's part in leases.
type leaseState struct {
	started atomic.Bool  // the renewal loop runs
	owned   atomic.Int64 // running runs of this owner at the last renewal
	ctx     context.Context
	stop    context.CancelFunc

	reaped, takeovers, lost *metrics.CounterVec
}

func (s *Scheduler) initLeases() {
	o := &s.opt
	if o.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		// The random part tells apart two lives of one pid (containers
		// all run as pid 1, and pids are reused).
		o.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.RenewEvery <= 0 || o.RenewEvery >= o.Lease {
		o.RenewEvery = o.Lease / 3
	}
	reg := o.Metrics
	if reg == nil {
		reg = metrics.New()
	}
	l := &s.lease
	l.ctx, l.stop = context.WithCancel(context.Background())
	reg.Gauge("tributary_sync_runs_owned", "Sync runs RUNNING in the store with this process as lease owner, at the last renewal.",
		func() float64 { return float64(l.owned.Load()) })
	reg.Gauge("tributary_sync_runs_active", "Sync runs this process is executing now.",
		func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(len(s.active)) })
	l.reaped = reg.Counter("tributary_sync_leases_reaped_total", "Runs of dead processes (expired leases) this process marked FAILED.")
	l.takeovers = reg.Counter("tributary_sync_takeovers_total", "Recovery runs this process started for runs whose lease expired.")
	l.lost = reg.Counter("tributary_sync_leases_lost_total", "Runs of this process cancelled because another process took them over after their lease expired.")
}

// Owner is the name this process's runs carry as lease owner.
func (s *Scheduler) Owner() string { return s.opt.Owner }

// newLease stamps a run about to start with this process's lease and makes
// sure the renewal loop runs (also for a scheduler never Started: the CLI).
func (s *Scheduler) newLease(r *store.Run, now time.Time) {
	r.Owner, r.LeaseUntilMs = s.opt.Owner, now.Add(s.opt.Lease).UnixMilli()
	if s.lease.started.CompareAndSwap(false, true) {
		go s.every(s.lease.ctx, s.opt.RenewEvery, s.renew)
	}
}

// every calls f every d until ctx ends.
func (s *Scheduler) every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// renew extends the leases of this process's runs and cancels those of its
// runs the store no longer lists: another process interrupted them after a
// lease lapsed (this process was stalled or cut off from the store), so
// going on would only race the recovery run.
func (s *Scheduler) renew(ctx context.Context) {
	s.mu.Lock()
	mine := make(map[string]*active, len(s.active))
	for id, a := range s.active {
		mine[id] = a
	}
	s.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, s.opt.RenewEvery)
	defer cancel()
	ids, err := s.opt.Store.RenewRuns(rctx, s.opt.Owner, s.opt.Now().Add(s.opt.Lease).UnixMilli())
	if errors.Is(err, store.ErrClosed) || ctx.Err() != nil {
		// The process is shutting down (the store closed, or the
		// renewer stopped mid-call); its runs have ended. A renewal that
		// timed out on its own still warns.
		return
	}
	if err != nil {
		s.opt.Log.Warn("renewing run leases", "owner", s.opt.Owner, "err", err)
		return
	}
	s.lease.owned.Store(int64(len(ids)))
	for _, id := range ids {
		delete(mine, id)
	}
	for _, a := range mine {
		if a.ended.Load() { // finished meanwhile: nothing was lost
			continue
		}
		if a.lost.Swap(true) {
			continue // cancelled at an earlier renewal, still winding down
		}
		a.cancel()
		s.lease.lost.Add(1)
		s.opt.Log.Warn("run lease lost: another process took the run over; cancelling it here", "import", a.run.Import, "run", a.run.ID)
	}
}

// reapLoop looks for lapsed leases until the scheduler stops. It stops
// first thing in Stop (runCtx): a run interrupted then could not be
// resumed here, and is better left to another process.
func (s *Scheduler) reapLoop() {
	s.every(s.runCtx, s.opt.Lease/2, func(ctx context.Context) {
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		if err := s.reap(ctx, reasonExpired); err != nil {
			s.opt.Log.Warn("looking for expired run leases", "err", err)
		}
	})
}

// reap interrupts the runs whose lease lapsed and resumes their imports.
func (s *Scheduler) reap(ctx context.Context, reason string) error {
	runs, err := s.opt.Store.InterruptRuns(ctx, reason, s.opt.Now().UnixMilli())
	if err != nil {
		return err
	}
	for _, r := range runs {
		s.lease.reaped.Add(1)
		s.opt.Log.Warn("run interrupted: its process stopped renewing its lease; resuming from the last committed watermark",
			"import", r.Import, "run", r.ID, "owner", r.Owner)
		s.resume(r)
	}
	return nil
}

// resume starts the recovery run of an interrupted run.
func (s *Scheduler) resume(old store.Run) {
	r, started, err := s.trigger(old.Project, old.Import, TriggerRecovery, "resume:"+old.ID, false)
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrPaused), errors.Is(err, run.ErrComplete), errors.Is(err, ErrStopping):
		s.opt.Log.Info("interrupted run not resumed", "import", old.Import, "run", old.ID, "why", err)
	case err != nil:
		s.opt.Log.Warn("interrupted run not resumed; its next run resumes it", "import", old.Import, "run", old.ID, "err", err)
	case started:
		s.lease.takeovers.Add(1)
		s.opt.Log.Info("took over an interrupted run", "import", old.Import, "run", old.ID, "recovery_run", r.ID)
	default:
		s.opt.Log.Info("interrupted run continues in a run already in progress", "import", old.Import, "run", old.ID, "by_run", r.ID)
	}
}

// alignedEvery is "@every D" with activations at multiples of D (counted
// from the zero time) instead of D after each process's start: every
// process sharing a store must compute the same periods, or each would
// run the import once per period of its own.
type alignedEvery struct{ every time.Duration }

func (a alignedEvery) Next(t time.Time) time.Time { return t.Truncate(a.every).Add(a.every) }

// parseSchedule parses an import's schedule (nil: manual only) and returns
// the length its periods are named by: the activations of a cron
// expression fall on whole minutes, those of "@every D" on multiples of D.
func parseSchedule(spec string) (cron.Schedule, time.Duration, error) {
	sched, err := importspec.ParseSchedule(spec)
	if err != nil || sched == nil {
		return nil, 0, err
	}
	if c, ok := sched.(cron.ConstantDelaySchedule); ok {
		return alignedEvery{c.Delay}, c.Delay, nil
	}
	return sched, time.Minute, nil
}

// periodOf names the period an activation at now belongs to: the
// activation time itself, found by truncating, so a tick a little late
// (a busy machine) still names the period every other process names.
func periodOf(now time.Time, granularity time.Duration) string {
	if granularity <= 0 {
		granularity = time.Second
	}
	return now.UTC().Truncate(granularity).Format(time.RFC3339)
}
