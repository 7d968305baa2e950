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
	// UpdateRun saves a run's progress or its end (by Run.ID). A finished
	// run is never changed again (ErrNotFound).
	UpdateRun(ctx context.Context, r Run) error
	// Runs lists runs newest first.
	Runs(ctx context.Context, f RunFilter) ([]Run, error)
	// InterruptRuns marks every RUNNING run FAILED with reason; a process
	// calls it at start, before it runs anything, for runs a crash cut off.
	InterruptRuns(ctx context.Context, reason string, endedMs int64) (int, error)
	// PutImportDoc stores (or with a nil Doc deletes) an import document.
	PutImportDoc(ctx context.Context, d ImportDoc) error
	// ImportDocs lists every stored import document.
	ImportDocs(ctx context.Context) ([]ImportDoc, error)
}
