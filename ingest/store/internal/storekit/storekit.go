// Package storekit is what the two store.Store implementations (duckstore
// and pgstore) share beyond the interface: the lifecycle guard every
// operation passes, and the sync_runs row both schemas spell the same way.
// The SQL that differs by dialect (placeholders, locking, RETURNING) stays
// in each store.
package storekit

import (
	"fmt"
	"sync"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Gate counts a store's operations in flight so Close can wait for them:
// Enter refuses once Shut has been called, and every Enter that succeeds
// is paired with one Done. The zero Gate is open.
type Gate struct {
	mu     sync.Mutex
	closed bool
	ops    sync.WaitGroup
}

// Enter registers an operation of the store named name (the error prefix,
// "duckstore" or "pgstore"), or fails with store.ErrClosed once Shut has
// been called. The error is formatted only on refusal: Enter is on every
// write's path.
func (g *Gate) Enter(name, op string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("%s: %s: %w", name, op, store.ErrClosed)
	}
	g.ops.Add(1)
	return nil
}

// Done ends an operation Enter registered.
func (g *Gate) Done() { g.ops.Done() }

// Shut refuses new operations and reports whether this call shut the
// gate (false: it was already shut, and Close has nothing left to do).
// It does not wait: a store may need to wake blocked operations first.
func (g *Gate) Shut() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	return true
}

// Wait returns when every registered operation is Done.
func (g *Gate) Wait() { g.ops.Wait() }

// RunColumns are the columns of a sync_runs row, the same in both
// schemas, in the order of RunValues and RunDest.
const RunColumns = `id, project, import, trigger, period, status, reason, started_ms, ended_ms,
	rows_read, imported, duplicate, failed, bytes, failures, owner, lease_until_ms`

// RunValues are r's values for RunColumns (Failures as JSON text).
func RunValues(r *store.Run) []any {
	return []any{r.ID, r.Project, r.Import, r.Trigger, r.Period, r.Status, r.Reason, r.StartedMs, r.EndedMs,
		r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes, string(r.Failures), r.Owner, r.LeaseUntilMs}
}

// RunDest are the scan destinations of RunColumns into r; the failures
// column goes to *fails, which the caller copies to r.Failures.
func RunDest(r *store.Run, fails *string) []any {
	return []any{&r.ID, &r.Project, &r.Import, &r.Trigger, &r.Period, &r.Status, &r.Reason, &r.StartedMs, &r.EndedMs,
		&r.RowsRead, &r.Imported, &r.Duplicate, &r.Failed, &r.Bytes, fails, &r.Owner, &r.LeaseUntilMs}
}
