package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/internal/storekit"
)

// Sync state lives in three tables (migration 2). Checkpoints are written
// only by Write, in the transaction of the records they cover. Runs follow
// the one-run-per-import rule across processes: StartRun decides under a
// transaction-scoped advisory lock of the import (nsRun), and a partial
// unique index refuses a second RUNNING row should anything bypass it.
// A RUNNING run carries its owner's lease (migration 3): RenewRuns extends
// it, and InterruptRuns fails the runs whose lease lapsed, each for one
// caller only (below).

type checkpointKey struct {
	project  int64
	importID string
}

type checkpointRow struct {
	checkpointKey
	value []byte // empty clears
}

// batchCheckpoints returns the checkpoint each import ends with after the
// batches (a later batch replaces an earlier one's), in key order: two
// writes then lock checkpoint rows in the same order and cannot deadlock.
func batchCheckpoints(batches []store.Batch) []checkpointRow {
	last := map[checkpointKey][]byte{}
	for i := range batches {
		if c := batches[i].Checkpoint; c != nil {
			last[checkpointKey{batches[i].Project, c.Import}] = c.Value
		}
	}
	out := make([]checkpointRow, 0, len(last))
	for k, v := range last {
		out = append(out, checkpointRow{k, v})
	}
	slices.SortFunc(out, func(a, b checkpointRow) int {
		return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.importID, b.importID))
	})
	return out
}

// writeCheckpoints stores a write's checkpoints in its transaction, so they
// commit (or not) with its records. Write calls it last: the row locks it
// takes are then held only for the commit, and no write waits on an event
// key while holding one.
func (w *writeTx) writeCheckpoints(ctx context.Context) error {
	if len(w.checkpoints) == 0 {
		return nil
	}
	var b pgx.Batch
	for _, c := range w.checkpoints {
		if len(c.value) == 0 {
			b.Queue(`DELETE FROM checkpoints WHERE project = $1 AND import = $2`, c.project, c.importID)
			continue
		}
		b.Queue(`INSERT INTO checkpoints (project, import, value) VALUES ($1, $2, $3)
			ON CONFLICT (project, import) DO UPDATE SET value = excluded.value`, c.project, c.importID, c.value)
	}
	if err := w.tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("store checkpoints: %w", err)
	}
	return nil
}

// Checkpoint implements store.Syncs.
func (s *Store) Checkpoint(ctx context.Context, project int64, importID string) ([]byte, error) {
	if err := s.enter("read checkpoint"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM checkpoints WHERE project = $1 AND import = $2`, project, importID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: read checkpoint: %w", err)
	}
	return v, nil
}

const runColumns = storekit.RunColumns

// StartRun implements store.Syncs.
func (s *Store) StartRun(ctx context.Context, rs store.RunStart) (store.Run, bool, error) {
	if err := s.enter("start run"); err != nil {
		return store.Run{}, false, err
	}
	defer s.ops.Done()
	r, started, err := s.startRun(ctx, rs)
	if err != nil {
		return store.Run{}, false, fmt.Errorf("pgstore: start run %s: %w", rs.Run.ID, err)
	}
	return r, started, nil
}

func (s *Store) startRun(ctx context.Context, rs store.RunStart) (store.Run, bool, error) {
	r := rs.Run
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Run{}, false, err
	}
	defer rollback(ctx, tx)
	// Held until commit, when the new run is visible: the next starter of
	// this import reads after it (each READ COMMITTED statement takes a new
	// snapshot, so the lock must come in a statement of its own, first).
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, runLockKey(s.schema, r.Project, r.Import)); err != nil {
		return store.Run{}, false, fmt.Errorf("lock: %w", err)
	}
	joinFrom := int64(math.MaxInt64) // no join window: only RUNNING or the period
	if rs.JoinWithinMs > 0 {
		joinFrom = r.StartedMs - rs.JoinWithinMs
	}
	existing, err := queryRuns(ctx, tx, `WHERE project = $1 AND import = $2
		AND (status = 'RUNNING' OR (period <> '' AND period = $3) OR (status = 'SUCCEEDED' AND started_ms >= $4))
		ORDER BY started_ms DESC, id DESC LIMIT 1`, r.Project, r.Import, r.Period, joinFrom)
	if err != nil {
		return store.Run{}, false, err
	}
	if len(existing) > 0 {
		return existing[0], false, nil
	}
	if rs.LimitPerHour > 0 {
		var n int
		err := tx.QueryRow(ctx, `SELECT count(*) FROM sync_runs
			WHERE project = $1 AND import = $2 AND trigger = $3 AND started_ms > $4`,
			r.Project, r.Import, r.Trigger, r.StartedMs-3_600_000).Scan(&n)
		if err != nil {
			return store.Run{}, false, err
		}
		if n >= rs.LimitPerHour {
			return store.Run{}, false, fmt.Errorf("%w: %d %s-triggered runs of import %s", store.ErrRunLimit, n, r.Trigger, r.Import)
		}
	}
	r.Status, r.EndedMs = store.RunRunning, 0
	if len(r.Failures) == 0 {
		r.Failures = []byte("[]")
	}
	_, err = tx.Exec(ctx, `INSERT INTO sync_runs (`+runColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
		storekit.RunValues(&r)...)
	if err != nil {
		return store.Run{}, false, err
	}
	// Not interrupted by ctx: a commit of unknown outcome could leave a
	// RUNNING run nobody renews, blocking the import until its lease lapses.
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return store.Run{}, false, err
	}
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
	// status = 'RUNNING' in the WHERE makes "a finished run never changes"
	// one statement: an update racing InterruptRuns either lands first or
	// finds the run finished.
	tag, err := s.pool.Exec(ctx, `UPDATE sync_runs SET status = $1, reason = $2, ended_ms = $3, rows_read = $4,
		imported = $5, duplicate = $6, failed = $7, bytes = $8, failures = $9
		WHERE id = $10 AND status = 'RUNNING'`,
		r.Status, r.Reason, r.EndedMs, r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes, string(r.Failures), r.ID)
	if err != nil {
		return fmt.Errorf("pgstore: update run %s: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: update run %s (no such running run): %w", r.ID, store.ErrNotFound)
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
	var (
		runs []store.Run
		err  error
	)
	if f.Import == "" {
		runs, err = queryRuns(ctx, s.pool, `WHERE project = $1 ORDER BY started_ms DESC, id DESC LIMIT $2`, f.Project, limit)
	} else {
		runs, err = queryRuns(ctx, s.pool, `WHERE project = $1 AND import = $2 ORDER BY started_ms DESC, id DESC LIMIT $3`,
			f.Project, f.Import, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: list runs: %w", err)
	}
	return runs, nil
}

// querier is what queryRuns needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func queryRuns(ctx context.Context, q querier, where string, args ...any) ([]store.Run, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM sync_runs `+where, args...)
	if err != nil {
		return nil, err
	}
	return scanRuns(rows)
}

// scanRuns reads rows of runColumns.
func scanRuns(rows pgx.Rows) ([]store.Run, error) {
	var (
		out   []store.Run
		r     store.Run
		fails string
	)
	_, err := pgx.ForEachRow(rows, storekit.RunDest(&r, &fails), func() error {
		r.Failures = []byte(fails)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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
	rows, err := s.pool.Query(ctx, `UPDATE sync_runs SET lease_until_ms = $2
		WHERE owner = $1 AND status = 'RUNNING' RETURNING id`, owner, untilMs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: renew runs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgstore: renew runs: %w", err)
	}
	return ids, nil
}

// InterruptRuns implements store.Syncs. Processes reaping at once cannot
// both get a run: FOR UPDATE SKIP LOCKED passes over a row another reaper
// (or a renewal) holds, and a row locked after its holder committed is
// re-checked against the committed version (FAILED, or renewed, by then).
// So a run is either renewed in time or interrupted, never both, and no
// reaper waits on another or deadlocks with it.
func (s *Store) InterruptRuns(ctx context.Context, reason string, nowMs int64) ([]store.Run, error) {
	if err := s.enter("interrupt runs"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `UPDATE sync_runs SET status = 'FAILED', reason = $1, ended_ms = $2
		WHERE status = 'RUNNING' AND id IN (SELECT id FROM sync_runs
			WHERE status = 'RUNNING' AND lease_until_ms < $2 FOR UPDATE SKIP LOCKED)
		RETURNING `+runColumns, reason, nowMs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: interrupt runs: %w", err)
	}
	runs, err := scanRuns(rows)
	if err != nil {
		return nil, fmt.Errorf("pgstore: interrupt runs: %w", err)
	}
	return runs, nil
}

// PutImportDoc implements store.Syncs.
func (s *Store) PutImportDoc(ctx context.Context, d store.ImportDoc) error {
	if err := s.enter("put import"); err != nil {
		return err
	}
	defer s.ops.Done()
	var err error
	if d.Doc == nil {
		_, err = s.pool.Exec(ctx, `DELETE FROM import_docs WHERE project = $1 AND id = $2`, d.Project, d.ID)
	} else {
		_, err = s.pool.Exec(ctx, `INSERT INTO import_docs (project, id, doc) VALUES ($1, $2, $3)
			ON CONFLICT (project, id) DO UPDATE SET doc = excluded.doc`, d.Project, d.ID, string(d.Doc))
	}
	if err != nil {
		return fmt.Errorf("pgstore: put import %s: %w", d.ID, err)
	}
	return nil
}

// ImportDocs implements store.Syncs.
func (s *Store) ImportDocs(ctx context.Context) ([]store.ImportDoc, error) {
	if err := s.enter("list imports"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT project, id, doc FROM import_docs ORDER BY project, id`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list imports: %w", err)
	}
	var (
		out []store.ImportDoc
		d   store.ImportDoc
		doc string
	)
	_, err = pgx.ForEachRow(rows, []any{&d.Project, &d.ID, &doc}, func() error {
		d.Doc = []byte(doc)
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list imports: %w", err)
	}
	return out, nil
}
