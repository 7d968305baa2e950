package duckstore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sync"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/internal/storekit"
)

// Checkpoints ride the write log with the records they cover (Write), so
// they are durable exactly when those records are; the loader copies them
// into the checkpoints table. Readers use the in-memory copy, which Write
// updates once the entry is durable and Open fills from the table after
// replaying the log.
//
// Runs and import documents bypass the log: they are small, rare writes
// that need a read-decide-write step (one run per import), done under
// syncState.runMu in one DuckDB statement each, durable at commit. The
// store file is locked to one process, so a process mutex is enough.
//
// That lock also tells which run owners are alive: only those that started
// or renewed a run through this handle, the one process that has the file
// open. InterruptRuns fails every other owner's RUNNING runs whatever their
// lease says, so a restart after a crash need not wait for leases to lapse.

type checkpointKey struct {
	project  int64
	importID string
}

type checkpointRow struct {
	project  int64
	importID string
	val      []byte
}

type syncState struct {
	mu          sync.Mutex
	checkpoints map[checkpointKey][]byte
	// runMu serialises the writes of runs: StartRun's decisions, and
	// updates that DuckDB would otherwise refuse as conflicting.
	runMu sync.Mutex
	live  map[string]bool // owners alive in this process (under runMu)
}

func (s *Store) loadCheckpoints(ctx context.Context) error {
	s.syncs.checkpoints = map[checkpointKey][]byte{}
	rows, err := s.db.QueryContext(ctx, `SELECT project, import, value FROM checkpoints`)
	if err != nil {
		return fmt.Errorf("load checkpoints: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k checkpointKey
		var v []byte
		if err := rows.Scan(&k.project, &k.importID, &v); err != nil {
			return fmt.Errorf("load checkpoints: %w", err)
		}
		s.syncs.checkpoints[k] = v
	}
	return rows.Err()
}

// noteCheckpoints publishes a durable write's checkpoints to readers.
func (s *Store) noteCheckpoints(cks []checkpointRow) {
	if len(cks) == 0 {
		return
	}
	s.syncs.mu.Lock()
	defer s.syncs.mu.Unlock()
	for _, c := range cks {
		k := checkpointKey{c.project, c.importID}
		if len(c.val) == 0 {
			delete(s.syncs.checkpoints, k)
		} else {
			s.syncs.checkpoints[k] = bytes.Clone(c.val)
		}
	}
}

// writeCheckpoints stores the last checkpoint of each import in a loader
// transaction (an empty value deletes).
func writeCheckpoints(ctx context.Context, c *duckdb.Conn, cks map[checkpointKey][]byte) error {
	for k, v := range cks {
		if err := execArgs(ctx, c, `DELETE FROM checkpoints WHERE project = ? AND import = ?`, k.project, k.importID); err != nil {
			return fmt.Errorf("write checkpoints: %w", err)
		}
		if len(v) == 0 {
			continue
		}
		if err := execArgs(ctx, c, `INSERT INTO checkpoints VALUES (?, ?, ?)`, k.project, k.importID, v); err != nil {
			return fmt.Errorf("write checkpoints: %w", err)
		}
	}
	return nil
}

// Checkpoint implements store.Syncs.
func (s *Store) Checkpoint(ctx context.Context, project int64, importID string) ([]byte, error) {
	if err := s.enter("read checkpoint"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	s.syncs.mu.Lock()
	defer s.syncs.mu.Unlock()
	return bytes.Clone(s.syncs.checkpoints[checkpointKey{project, importID}]), nil
}

const runColumns = storekit.RunColumns

// StartRun implements store.Syncs.
func (s *Store) StartRun(ctx context.Context, rs store.RunStart) (store.Run, bool, error) {
	if err := s.enter("start run"); err != nil {
		return store.Run{}, false, err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	r := rs.Run
	joinFrom := int64(math.MaxInt64)
	if rs.JoinWithinMs > 0 {
		joinFrom = r.StartedMs - rs.JoinWithinMs
	}
	existing, err := s.queryRuns(ctx, `WHERE project = ? AND import = ?
		AND (status = 'RUNNING' OR (period <> '' AND period = ?) OR (status = 'SUCCEEDED' AND started_ms >= ?))
		ORDER BY started_ms DESC LIMIT 1`, r.Project, r.Import, r.Period, joinFrom)
	if err != nil {
		return store.Run{}, false, err
	}
	if len(existing) > 0 {
		return existing[0], false, nil
	}
	if rs.LimitPerHour > 0 {
		var n int
		err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sync_runs WHERE project = ? AND import = ? AND trigger = ? AND started_ms > ?`,
			r.Project, r.Import, r.Trigger, r.StartedMs-3_600_000).Scan(&n)
		if err != nil {
			return store.Run{}, false, fmt.Errorf("duckstore: start run: %w", err)
		}
		if n >= rs.LimitPerHour {
			return store.Run{}, false, fmt.Errorf("%w: %d %s-triggered runs of import %s", store.ErrRunLimit, n, r.Trigger, r.Import)
		}
	}
	r.Status, r.EndedMs = store.RunRunning, 0
	if len(r.Failures) == 0 {
		r.Failures = []byte("[]")
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sync_runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		storekit.RunValues(&r)...)
	if err != nil {
		return store.Run{}, false, fmt.Errorf("duckstore: start run: %w", err)
	}
	s.noteOwner(r.Owner)
	return r, true, nil
}

// UpdateRun implements store.Syncs.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) error {
	if err := s.enter("update run"); err != nil {
		return err
	}
	defer s.ops.Done()
	if len(r.Failures) == 0 {
		r.Failures = []byte("[]")
	}
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	res, err := s.db.ExecContext(ctx, `UPDATE sync_runs SET status = ?, reason = ?, ended_ms = ?, rows_read = ?, imported = ?,
		duplicate = ?, failed = ?, bytes = ?, failures = ? WHERE id = ? AND status = 'RUNNING'`,
		r.Status, r.Reason, r.EndedMs, r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes, string(r.Failures), r.ID)
	if err != nil {
		return fmt.Errorf("duckstore: update run: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("duckstore: update run %s: %w", r.ID, store.ErrNotFound)
	}
	return nil
}

// Runs implements store.Syncs.
func (s *Store) Runs(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := s.enter("list runs"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	limit := f.Limit
	if limit <= 0 {
		limit = 30
	}
	if f.Import == "" {
		return s.queryRuns(ctx, `WHERE project = ? ORDER BY started_ms DESC, id DESC LIMIT ?`, f.Project, limit)
	}
	return s.queryRuns(ctx, `WHERE project = ? AND import = ? ORDER BY started_ms DESC, id DESC LIMIT ?`, f.Project, f.Import, limit)
}

func (s *Store) queryRuns(ctx context.Context, where string, args ...any) ([]store.Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+` FROM sync_runs `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("duckstore: runs: %w", err)
	}
	defer rows.Close()
	var out []store.Run
	for rows.Next() {
		var r store.Run
		var fails string
		if err := rows.Scan(storekit.RunDest(&r, &fails)...); err != nil {
			return nil, fmt.Errorf("duckstore: runs: %w", err)
		}
		r.Failures = []byte(fails)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: runs: %w", err)
	}
	return out, nil
}

// noteOwner records a live owner; the caller holds runMu.
func (s *Store) noteOwner(owner string) {
	if owner == "" {
		return
	}
	if s.syncs.live == nil {
		s.syncs.live = map[string]bool{}
	}
	s.syncs.live[owner] = true
}

// RenewRuns implements store.Syncs.
func (s *Store) RenewRuns(ctx context.Context, owner string, untilMs int64) ([]string, error) {
	if owner == "" {
		return nil, nil
	}
	if err := s.enter("renew runs"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	s.noteOwner(owner)
	rows, err := s.db.QueryContext(ctx, `UPDATE sync_runs SET lease_until_ms = ? WHERE owner = ? AND status = 'RUNNING' RETURNING id`,
		untilMs, owner)
	if err != nil {
		return nil, fmt.Errorf("duckstore: renew runs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("duckstore: renew runs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: renew runs: %w", err)
	}
	return ids, nil
}

// InterruptRuns implements store.Syncs: runs whose lease lapsed, and every
// run of an owner not alive in this process (see the top of the file).
func (s *Store) InterruptRuns(ctx context.Context, reason string, nowMs int64) ([]store.Run, error) {
	if err := s.enter("interrupt runs"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	s.syncs.runMu.Lock()
	defer s.syncs.runMu.Unlock()
	running, err := s.queryRuns(ctx, `WHERE status = 'RUNNING' ORDER BY started_ms, id`)
	if err != nil {
		return nil, fmt.Errorf("duckstore: interrupt runs: %w", err)
	}
	var out []store.Run
	for _, r := range running {
		if r.LeaseUntilMs >= nowMs && s.syncs.live[r.Owner] {
			continue
		}
		// runMu covers every write of runs, so the row is as read.
		if _, err := s.db.ExecContext(ctx, `UPDATE sync_runs SET status = 'FAILED', reason = ?, ended_ms = ? WHERE id = ?`,
			reason, nowMs, r.ID); err != nil {
			return out, fmt.Errorf("duckstore: interrupt runs: %w", err)
		}
		r.Status, r.Reason, r.EndedMs = store.RunFailed, reason, nowMs
		out = append(out, r)
	}
	return out, nil
}

// PutImportDoc implements store.Syncs.
func (s *Store) PutImportDoc(ctx context.Context, d store.ImportDoc) error {
	if err := s.enter("put import"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: put import: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM import_docs WHERE project = ? AND id = ?`, d.Project, d.ID); err != nil {
		return fmt.Errorf("duckstore: put import: %w", err)
	}
	if d.Doc != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO import_docs VALUES (?, ?, ?)`, d.Project, d.ID, string(d.Doc)); err != nil {
			return fmt.Errorf("duckstore: put import: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: put import: %w", err)
	}
	return nil
}

// ImportDocs implements store.Syncs.
func (s *Store) ImportDocs(ctx context.Context) ([]store.ImportDoc, error) {
	if err := s.enter("list imports"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT project, id, doc FROM import_docs ORDER BY project, id`)
	if err != nil {
		return nil, fmt.Errorf("duckstore: imports: %w", err)
	}
	defer rows.Close()
	var out []store.ImportDoc
	for rows.Next() {
		var d store.ImportDoc
		var doc string
		if err := rows.Scan(&d.Project, &d.ID, &doc); err != nil {
			return nil, fmt.Errorf("duckstore: imports: %w", err)
		}
		d.Doc = []byte(doc)
		out = append(out, d)
	}
	return out, rows.Err()
}
