// Package scheduler runs warehouse imports on cron schedules and on
// manual triggers, one run per import at a time, and keeps their history.
//
// The store decides whether a run may start (store.Syncs.StartRun): a run
// of the import in progress, one of the same cron period, or one started
// within the join window is returned instead of starting another, so a
// cron tick and a manual trigger at the same moment make one run, as
// River's unique-per-period jobs do. Because the decision lives in the
// store, it holds for every process sharing it; run leases (lease.go) let
// another process resume the runs of one that died.
package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// Triggers.
const (
	TriggerSchedule = "schedule"
	TriggerAPI      = "api"
	TriggerCLI      = "cli"
	TriggerReplay   = "replay" // the quarantine's rows, not the table's (run.Options.Replay)
)

var (
	// ErrNotFound: no such import in the project.
	ErrNotFound = errors.New("no such import")
	// ErrPaused refuses a manual trigger of a paused import.
	ErrPaused = errors.New("import is paused")
	// ErrStopping refuses new runs during shutdown.
	ErrStopping = errors.New("scheduler is shutting down")
)

// RunStore is what the scheduler needs of a store: the run state, and a
// run's end saved with the alerts it raises (one transaction).
type RunStore interface {
	store.Syncs
	EndRun(ctx context.Context, e store.RunEnd) error
}

// Options configure a Scheduler.
type Options struct {
	Runner *run.Runner
	Store  RunStore // run state: starts, updates, leases, history, ends with their alerts
	Log    *slog.Logger
	Now    func() time.Time
	// JoinWindow: a trigger this soon after a run of the same import
	// started joins it (default 2s).
	JoinWindow time.Duration
	// APILimit caps API-triggered runs per import per hour (default 5).
	APILimit int
	// ProgressEvery is how often a run's progress is saved (default 2s).
	ProgressEvery time.Duration
	// Owner names this process in the runs it starts (default
	// host/pid/random). Lease is how long a run's claim holds unrenewed
	// (default 30s): then another process interrupts and resumes it.
	// RenewEvery is how often the leases of this process's runs are
	// renewed (default Lease/3); lapsed leases are looked for every Lease/2.
	Owner      string
	Lease      time.Duration
	RenewEvery time.Duration
	// Metrics receives the lease figures (nil: not exported).
	Metrics *metrics.Registry
	// Monitor, when set, watches every run for the alert rules.
	Monitor Monitor
}

// Scheduler owns the cron and the runs in progress.
type Scheduler struct {
	opt     Options
	catalog *Catalog
	cron    *cron.Cron

	mu       sync.Mutex
	entries  map[key]cron.EntryID
	active   map[string]*active // by run id
	stopping bool
	runCtx   context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	lease    leaseState
}

type active struct {
	run    store.Run
	stats  run.Stats
	cancel context.CancelFunc
	// lost: another process took the run over (lease.go); ended: the run
	// is saving its end, so a renewal that misses it lost nothing.
	lost, ended atomic.Bool
}

// New builds a scheduler over the catalog; Start begins scheduling.
func New(c *Catalog, opt Options) *Scheduler {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.JoinWindow <= 0 {
		opt.JoinWindow = 2 * time.Second
	}
	if opt.APILimit <= 0 {
		opt.APILimit = 5
	}
	if opt.ProgressEvery <= 0 {
		opt.ProgressEvery = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Scheduler{
		opt: opt, catalog: c, entries: map[key]cron.EntryID{}, active: map[string]*active{},
		runCtx: ctx, cancel: cancel,
		cron: cron.New(cron.WithParser(cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor))),
	}
	s.initLeases()
	c.onChange = s.reschedule
	return s
}

// Catalog returns the imports the scheduler runs.
func (s *Scheduler) Catalog() *Catalog { return s.catalog }

// Start marks runs a crash cut off as FAILED (those whose lease lapsed;
// with the embedded store, all) and resumes them, schedules every import,
// starts the cron and the search for lapsed leases.
func (s *Scheduler) Start(ctx context.Context) error {
	if err := s.reap(ctx, reasonStopped); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	for _, e := range s.catalog.List(0) {
		s.reschedule(e)
	}
	s.cron.Start()
	// A scheduled import that has never run starts at once rather than
	// at its first tick (up to a week away). The "first" period makes it
	// one run ever, whichever process gets there.
	for _, e := range s.catalog.List(0) {
		if sched, _ := importspec.ParseSchedule(e.Schedule()); sched == nil || e.Paused() {
			continue
		}
		runs, err := s.opt.Store.Runs(ctx, store.RunFilter{Project: e.Import.ProjectID, Import: e.Import.ID, Limit: 1})
		if err != nil {
			return fmt.Errorf("scheduler: %w", err)
		}
		if len(runs) == 0 {
			if _, _, err := s.trigger(e.Import.ProjectID, e.Import.ID, TriggerSchedule, "first", false); err != nil && !errors.Is(err, run.ErrComplete) {
				s.opt.Log.Warn("first run not started", "import", e.Import.ID, "err", err)
			}
		}
	}
	go s.reapLoop()
	return nil
}

// reschedule replaces an import's cron entry after a change.
func (s *Scheduler) reschedule(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{e.Import.ProjectID, e.Import.ID}
	if id, ok := s.entries[k]; ok {
		s.cron.Remove(id)
		delete(s.entries, k)
	}
	if e.Deleted || e.Paused() || s.stopping {
		return
	}
	sched, _, err := parseSchedule(e.Schedule())
	if err != nil || sched == nil {
		return // api-only (a bad schedule was refused when the import was declared)
	}
	project, id := e.Import.ProjectID, e.Import.ID
	s.entries[k] = s.cron.Schedule(sched, cron.FuncJob(func() { s.tick(project, id) }))
}

// tick is a cron activation. Its period is the activation time, which
// every process computes alike for the same schedule (periodOf).
func (s *Scheduler) tick(project int64, id string) {
	var granularity time.Duration
	if e, ok := s.catalog.Get(project, id); ok {
		_, granularity, _ = parseSchedule(e.Schedule())
	}
	period := periodOf(s.opt.Now(), granularity)
	r, started, err := s.trigger(project, id, TriggerSchedule, period, false)
	switch {
	case errors.Is(err, run.ErrComplete):
		s.opt.Log.Debug("scheduled run skipped: one_time import complete", "import", id)
	case err != nil:
		s.opt.Log.Warn("scheduled run not started", "import", id, "err", err)
	case !started:
		// Debug: with several processes on one store, every tick but one
		// per period ends here.
		s.opt.Log.Debug("scheduled run skipped: a run of this import is in progress or already ran this period", "import", id, "run", r.ID)
	}
}

// Trigger starts a run now (a manual sync) unless one is in progress or
// started within the join window; then it returns that run, started=false.
// An API trigger over the hourly limit gets store.ErrRunLimit.
func (s *Scheduler) Trigger(ctx context.Context, project int64, id, trigger string, full bool) (store.Run, bool, error) {
	return s.trigger(project, id, trigger, "", full)
}

func (s *Scheduler) trigger(project int64, id, trigger, period string, full bool) (store.Run, bool, error) {
	e, ok := s.catalog.Get(project, id)
	if !ok {
		return store.Run{}, false, fmt.Errorf("import %s in project %d: %w", id, project, ErrNotFound)
	}
	if e.Paused() {
		return store.Run{}, false, fmt.Errorf("import %s: %w", id, ErrPaused)
	}
	if e.Import.SyncMode == importspec.OneTime && !full && trigger != TriggerReplay {
		done, err := s.opt.Runner.Complete(s.runCtx, e.Import)
		if err != nil {
			return store.Run{}, false, err
		}
		if done {
			return store.Run{}, false, fmt.Errorf("import %s: %w", id, run.ErrComplete)
		}
	}
	s.mu.Lock()
	stopping := s.stopping
	if !stopping {
		s.wg.Add(1) // before the run exists, so Stop waits for it
	}
	s.mu.Unlock()
	if stopping {
		return store.Run{}, false, ErrStopping
	}
	launched := false
	defer func() {
		if !launched {
			s.wg.Done()
		}
	}()
	now := s.opt.Now()
	rs := store.RunStart{
		Run:          store.Run{ID: newRunID(now), Project: project, Import: id, Trigger: trigger, Period: period, StartedMs: now.UnixMilli()},
		JoinWithinMs: s.opt.JoinWindow.Milliseconds(),
	}
	s.newLease(&rs.Run, now)
	if trigger == TriggerAPI {
		rs.LimitPerHour = s.opt.APILimit
	}
	if trigger == TriggerReplay {
		rs.JoinWithinMs = 0 // a replay is not the sync that just ended
	}
	r, started, err := s.opt.Store.StartRun(s.runCtx, rs)
	if err != nil || !started {
		return r, false, err
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	a := &active{run: r, cancel: cancel}
	s.mu.Lock()
	s.active[r.ID] = a
	s.mu.Unlock()
	launched = true
	go func() {
		defer s.wg.Done()
		s.execute(ctx, a, e, full, nil)
	}()
	return r, true, nil
}

// ErrBusy refuses a foreground run while another run of the import is in
// progress.
var ErrBusy = errors.New("a run of this import is in progress")

// RunForeground runs e now in the caller's goroutine (the CLI) and
// returns the finished run; progress gets the stats after every batch.
// Cancelling ctx cancels the run the way a shutdown does.
func (s *Scheduler) RunForeground(ctx context.Context, e Entry, trigger string, full bool, progress func(run.Stats)) (store.Run, error) {
	now := s.opt.Now()
	rs := store.RunStart{Run: store.Run{ID: newRunID(now), Project: e.Import.ProjectID, Import: e.Import.ID, Trigger: trigger, StartedMs: now.UnixMilli()}}
	s.newLease(&rs.Run, now)
	r, started, err := s.opt.Store.StartRun(ctx, rs)
	if err != nil {
		return store.Run{}, err
	}
	if !started {
		return r, fmt.Errorf("import %s: %w (run %s)", e.Import.ID, ErrBusy, r.ID)
	}
	rctx, cancel := context.WithCancel(ctx)
	a := &active{run: r, cancel: cancel}
	s.mu.Lock()
	s.active[r.ID] = a // so that its lease renewals can cancel it (lease.go)
	s.mu.Unlock()
	return s.execute(rctx, a, e, full, progress), nil
}

// newRunID is time-ordered and unique: it also tags the run's events as
// $warehouse_import_job_id.
func newRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
}

func (s *Scheduler) execute(ctx context.Context, a *active, e Entry, full bool, progress func(run.Stats)) store.Run {
	defer a.cancel()
	lastSave := s.opt.Now()
	// Count: a run asks a source that can count (connectors.Counter) for
	// its total once, so the console and the CLI's bar show an ETA; a
	// quiet CLI run (no progress func) has nothing to show it in.
	count := (progress != nil || a.run.Trigger != TriggerCLI) && a.run.Trigger != TriggerReplay
	opt := run.Options{RunID: a.run.ID, Full: full, Replay: a.run.Trigger == TriggerReplay, Count: count, Progress: func(st run.Stats) {
		if progress != nil {
			progress(st)
		}
		s.mu.Lock()
		a.stats = st
		s.mu.Unlock()
		if now := s.opt.Now(); now.Sub(lastSave) >= s.opt.ProgressEvery {
			lastSave = now
			r := fill(a.run, st)
			if err := s.opt.Store.UpdateRun(context.WithoutCancel(ctx), r); err != nil {
				s.opt.Log.Warn("saving run progress", "run", r.ID, "err", err)
			}
		}
	}}
	var w RunWatch
	if s.opt.Monitor != nil {
		w = s.opt.Monitor.Watch(ctx, e.Import, a.run)
		opt.Preflight = w.Preflight
	}
	st, err := s.opt.Runner.Run(ctx, e.Import, e.Project, opt)
	a.ended.Store(true)
	r := fill(a.run, st)
	r.EndedMs = s.opt.Now().UnixMilli()
	held, heldReason, isHeld := heldStatus(err)
	switch {
	case err == nil:
		r.Status = store.RunSucceeded
	case isHeld:
		r.Status, r.Reason = held, heldReason
	case a.lost.Load():
		// Another process interrupted the run and resumes it; the store
		// refuses this end (ErrNotFound), which is right.
		r.Status, r.Reason = store.RunFailed, reasonExpired
	case ctx.Err() != nil:
		r.Status, r.Reason = store.RunCancelled, "cancelled: the server is shutting down; the next run resumes from the last committed watermark"
	default:
		r.Status, r.Reason = store.RunFailed, err.Error()
	}
	if err := s.saveEnd(context.Background(), w, r, st); err != nil && !(a.lost.Load() && errors.Is(err, store.ErrNotFound)) {
		s.opt.Log.Error("saving run result", "run", r.ID, "err", err)
	}
	if r.Status != store.RunSucceeded {
		s.opt.Log.Warn("sync run ended", "import", r.Import, "run", r.ID, "status", r.Status, "reason", r.Reason)
	}
	s.mu.Lock()
	delete(s.active, a.run.ID)
	s.mu.Unlock()
	return r
}

// fill copies a run's stats into its history record.
func fill(r store.Run, st run.Stats) store.Run {
	r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes = st.RowsRead, st.Imported, st.Duplicates, st.Failed, st.Bytes
	type failure struct {
		Row     int64  `json:"row"`
		Key     string `json:"key,omitempty"`
		Column  string `json:"column,omitempty"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	}
	fs := make([]failure, len(st.Failures))
	for i, f := range st.Failures {
		fs[i] = failure{Row: f.Row, Key: f.Key, Column: f.Column, Field: f.Field, Message: f.Message}
	}
	r.Failures, _ = json.Marshal(fs) // plain structs: cannot fail
	r.Failures = withRetries(r.Failures, st.RetryLog)
	return r
}

// Progress returns the live stats of a run in progress.
func (s *Scheduler) Progress(runID string) (run.Stats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.active[runID]
	if !ok {
		return run.Stats{}, false
	}
	return a.stats, true
}

// Stop stops the cron and new runs, cancels the runs in progress (each
// commits the batch in flight and is marked CANCELLED) and waits for them
// until ctx ends.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	<-s.cron.Stop().Done()
	s.cancel()
	// Leases are renewed until the runs have saved their end, so no
	// other process takes over a run that is only stopping.
	defer s.lease.stop()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("scheduler: runs still stopping: %w", ctx.Err())
	}
}
