package store

import (
	"context"
	"errors"
)

// Checkpoint is a sync's resume point, opaque to the store. It rides a
// Batch so that it commits in the same transaction as the records it
// covers: after a crash the store holds either both or neither, and a sync
// resuming from it neither skips nor repeats rows.
type Checkpoint struct {
	Import string
	// Value replaces the import's checkpoint; nil or empty clears it
	// (a full re-read starts from nothing).
	Value []byte
}

// Run statuses.
const (
	RunRunning   = "RUNNING"
	RunSucceeded = "SUCCEEDED"
	RunFailed    = "FAILED"
	RunCancelled = "CANCELLED"
)

// Run is one sync of an import, as its history shows it.
type Run struct {
	ID      string
	Project int64
	Import  string
	Trigger string // schedule | api | cli | startup
	// Period makes a scheduled run unique: a second start with the same
	// (project, import, period) joins the first instead of running again,
	// even after the first has finished. "" for unscheduled runs.
	Period    string
	Status    string
	Reason    string // why a run failed or was cancelled
	StartedMs int64
	EndedMs   int64 // 0 while running
	RowsRead  int64
	Imported  int64
	Duplicate int64
	Failed    int64
	Bytes     int64
	// Failures is a JSON array of the first failures (row, field, message).
	Failures []byte
	// Owner names the process running the run (set at StartRun) and
	// LeaseUntilMs is when its claim lapses unless RenewRuns extends it.
	// Several processes share one store, so a RUNNING run alone does not
	// tell a live run from one whose process died: an expired lease does.
	// A run started without a lease (0) counts as expired. Lease times are
	// the processes' own clocks, so those sharing a store need clocks in
	// step to well within a lease (NTP does it).
	Owner        string
	LeaseUntilMs int64
}

// RunStart asks for a new run; StartRun decides whether it may start.
type RunStart struct {
	Run Run
	// JoinWithinMs: a run of the same import that succeeded and started
	// this recently (or is still running) is returned instead of starting
	// another, so a cron tick and a manual trigger at the same moment make
	// one run. A failed or cancelled run is never joined: a retry must run.
	JoinWithinMs int64
	// LimitPerHour > 0 refuses (ErrRunLimit) when that many runs with the
	// same Trigger started in the hour before Run.StartedMs.
	LimitPerHour int
}

// RunFilter selects history.
type RunFilter struct {
	Project int64
	Import  string // "" = every import of the project
	Limit   int    // 0 = 30
}

// ImportDoc is an import declared through the app API (or the app API's
// changes to one declared in a file), kept as the JSON document the API
// took, so that every process sees the same imports.
type ImportDoc struct {
	Project int64
	ID      string
	Doc     []byte
}

var (
	// ErrRunLimit refuses a run over RunStart.LimitPerHour.
	ErrRunLimit = errors.New("store: too many runs in the last hour")
	// ErrRunEnded refuses a write for a run that is no longer RUNNING:
	// another process took it over after its lease expired (Batch.RunID).
	ErrRunEnded = errors.New("store: the run has ended; another process took it over")
)

// Syncs keeps what warehouse syncs need to run unattended: checkpoints
// (written only through Batch.Checkpoint), run history with the
// one-run-per-import rule, and API-declared imports.
type Syncs interface {
	// Checkpoint returns the import's committed checkpoint, nil if none.
	Checkpoint(ctx context.Context, project int64, importID string) ([]byte, error)
	// StartRun records rs.Run as RUNNING unless a run of the same import is
	// running, shares its Period, or succeeded within JoinWithinMs; then it
	// returns that run and started=false. The decision is atomic across
	// every process using the store.
	StartRun(ctx context.Context, rs RunStart) (r Run, started bool, err error)
	// UpdateRun saves a run's progress or its end (by Run.ID); it leaves
	// Owner and LeaseUntilMs alone. A finished run is never changed again
	// (ErrNotFound).
	UpdateRun(ctx context.Context, r Run) error
	// RenewRuns extends to untilMs the lease of every RUNNING run of owner
	// and returns their ids. A run of owner missing from them is no longer
	// its to run: it finished, or another process interrupted it after its
	// lease expired. An empty owner renews nothing.
	RenewRuns(ctx context.Context, owner string, untilMs int64) ([]string, error)
	// Runs lists runs newest first.
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// InterruptRuns marks FAILED with reason, ended at nowMs, every RUNNING
	// run whose lease expired (LeaseUntilMs < nowMs), and returns them as
	// they now are: runs a dead process cut off, which the caller may
	// resume. Among processes calling it at once each run is returned to
	// one only. A store that one process alone can open also interrupts the
	// runs of owners that have not started or renewed a run through it
	// since it was opened, leased or not: their process is gone.
	InterruptRuns(ctx context.Context, reason string, nowMs int64) ([]Run, error)
	// PutImportDoc stores (or with a nil Doc deletes) an import document.
	PutImportDoc(ctx context.Context, d ImportDoc) error
	// ImportDocs lists every stored import document.
	ImportDocs(ctx context.Context) ([]ImportDoc, error)
}
