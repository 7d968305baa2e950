// Package run executes one sync of a warehouse import: read through the
// source, map column by column, validate like /import, write durably
// through the store. Runs are bounded in memory: one Arrow batch, one
// mapped buffer and one store write are in flight at a time.
//
// A time_based import reads rows past its watermark, ordered by (insert
// time, tie key), and commits the watermark of each batch's last row in
// the same store write as the batch's records: a crash leaves both or
// neither, so the next run neither skips nor repeats rows. Other modes
// re-read the table; the deterministic $insert_id makes re-read events
// duplicates the store absorbs, and profile $set updates are idempotent.
// People and groups runs track the properties they own, and a full_sync
// run replaces them with what the table holds (fullsync.go).
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/store"
)

// ErrNotSupported marks import types a run cannot handle.
var ErrNotSupported = errors.New("import type not supported")

// ErrComplete refuses to run a one_time import that has already succeeded.
var ErrComplete = errors.New("one_time import already complete")

// Stats summarise a run.
type Stats struct {
	RunID      string
	RowsRead   int64
	Imported   int64 // new records written
	Duplicates int64 // records already stored (re-read rows)
	Failed     int64
	Failures   []mapping.RowError // the first 100
	Bytes      int64              // mapped record bytes
	Retries    int                // transient source errors recovered from
	RetryLog   []Retry            // their causes, in order (retry.go)
	Started    time.Time
	Duration   time.Duration
	// Total is the row count the source reported before reading (0 when
	// it cannot tell), for progress and ETA.
	Total int64
	// A Mirror run's rows by what they did (mirror.go).
	Inserted, Updated, Deleted, Unchanged int64

	preflighted bool // Options.Preflight was called (preflight.go)
	// A Mirror run's table rows after it, once known (mirrorrows.go).
	mirrorRows   int64
	mirrorRowsOK bool
}

// Rate is rows read per second.
func (s Stats) Rate() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.RowsRead) / s.Duration.Seconds()
}

// Runner runs imports.
type Runner struct {
	Registry *connectors.Registry
	Store    Store
	Log      *slog.Logger
	Now      func() time.Time
	// Backoff paces retries of transient source errors; zero = defaults.
	Backoff Backoff
	// OneOff marks a runner of one-off runs (tributary sync -c FILE), whose
	// import may be in no imports_dir: its Mirror runs note no source, so
	// a server start never takes the import for removed (mirrorsource.go).
	OneOff bool
}

// Options are one run's choices.
type Options struct {
	RunID string
	// Full ignores the watermark and re-reads the whole table (dedup
	// absorbs what was read before); the watermark moves on as usual.
	Full bool
	// Progress, when set, gets the stats after every batch.
	Progress func(Stats)
	// Count asks the source for the row count first (for an ETA).
	Count bool
	// Replay runs the import's quarantined rows through its current
	// mapping instead of reading the source (ledger_replay.go).
	Replay bool
	// Preflight, when set, sees the run's Plan before anything is
	// written, once per run; an error ends the run with ErrHeld.
	Preflight func(ctx context.Context, p Plan) error
}

const maxFailures = 100

// completeMark is a one_time import's checkpoint once it has succeeded.
const completeMark = `{"complete":true}`

// Run syncs im once. Transient source errors are retried with backoff
// inside the run, resuming from the last committed watermark; permanent
// ones (connectors.IsPermanent) and a cancelled ctx end it at once.
func (r *Runner) Run(ctx context.Context, im *importspec.Import, project importspec.Project, opt Options) (Stats, error) {
	st := Stats{RunID: opt.RunID, Started: r.now()}
	defer func() { st.Duration = r.now().Sub(st.Started) }()
	switch im.ImportType {
	case importspec.EventStream, importspec.People, importspec.Groups, importspec.LookupTable:
	default:
		return st, fmt.Errorf("import %s: %w: %s", im.ID, ErrNotSupported, im.ImportType)
	}
	if opt.Replay {
		err := r.replay(ctx, im, project, opt, &st)
		return st, err
	}
	if im.SyncMode == importspec.OneTime && !opt.Full {
		done, err := r.Complete(ctx, im)
		if err != nil {
			return st, err
		}
		if done {
			return st, fmt.Errorf("import %s: %w (sync with --full to load it again)", im.ID, ErrComplete)
		}
	}
	if im.IsMirror() {
		err := r.runMirror(ctx, im, project, opt, &st)
		return st, err
	}
	bo := r.Backoff.withDefaults()
	own := newOwnership(r.Store, im, opt.RunID, st.Started)
	for attempt := 0; ; attempt++ {
		a := &pass{r: r, im: im, project: project, opt: opt, st: &st, own: own,
			ledger: newLedger(r.Store, im.ProjectID, im.ID, opt.RunID, st.Started.UnixMilli())}
		err := a.run(ctx)
		if err == nil {
			break
		}
		if a.committed {
			// A retry resumes from this run's own committed watermark.
			opt.Full = false
		}
		err = fmt.Errorf("import %s: %w", im.ID, err)
		if ctx.Err() != nil || connectors.IsPermanent(err) || attempt+1 >= bo.Attempts {
			return st, err
		}
		wait := bo.delay(attempt)
		r.log().Warn("sync: transient source error, retrying", "import", im.ID, "run", opt.RunID,
			"attempt", attempt+1, "wait", wait.Round(time.Millisecond), "err", err)
		st.retried(r.now(), err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return st, fmt.Errorf("import %s: %w", im.ID, ctx.Err())
		}
	}
	if own != nil && own.replace {
		n, err := own.finish(ctx)
		if err != nil {
			return st, fmt.Errorf("import %s: %w", im.ID, err)
		}
		r.log().Info("sync: properties the table no longer holds unset", "import", im.ID, "run", opt.RunID, "profiles", n)
	}
	if im.SyncMode == importspec.OneTime {
		mark := store.Batch{Project: im.ProjectID, RunID: opt.RunID, Checkpoint: &store.Checkpoint{Import: im.ID, Value: []byte(completeMark)}}
		if _, err := r.Store.Write(context.WithoutCancel(ctx), []store.Batch{mark}); err != nil {
			return st, fmt.Errorf("import %s: mark complete: %w", im.ID, err)
		}
	}
	r.log().Info("sync finished", "import", im.ID, "run", opt.RunID, "rows", st.RowsRead,
		"imported", st.Imported, "duplicates", st.Duplicates, "failed", st.Failed, "retries", st.Retries)
	return st, nil
}

// Complete reports whether a one_time import has already succeeded.
func (r *Runner) Complete(ctx context.Context, im *importspec.Import) (bool, error) {
	ck, err := r.Store.Checkpoint(ctx, im.ProjectID, im.ID)
	if err != nil {
		return false, fmt.Errorf("import %s: read checkpoint: %w", im.ID, err)
	}
	return string(ck) == completeMark, nil
}

// Reset forgets an import's checkpoint (its watermark, or a one_time
// import's completion): the next run reads the table from the start.
func (r *Runner) Reset(ctx context.Context, im *importspec.Import) error {
	b := store.Batch{Project: im.ProjectID, Checkpoint: &store.Checkpoint{Import: im.ID}}
	if _, err := r.Store.Write(ctx, []store.Batch{b}); err != nil {
		return fmt.Errorf("import %s: reset checkpoint: %w", im.ID, err)
	}
	return nil
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}
