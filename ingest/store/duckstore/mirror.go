package duckstore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/ingest/store"
)

// mirrorSchema holds Mirror syncs' table states (store.Mirrors). A new
// table, so files made before gain it and older builds ignore it.
//
// mirror_keys has no primary key on purpose: DuckDB keeps an ART index
// wholly in memory, outside what it can spill, and a 100k-key state's
// index alone overran `tributary sync`'s DuckDB share (24 MiB) at
// commit. Without it the state is an append-only column table whose
// memory does not grow with the table: a changed key gets a new version
// (mirror_versions.go), and lookups scan the state, pruned by the
// batch's key range through the row groups' zone maps (a table read in
// the same order each run keeps its keys clustered).
//
// A row's pending flag is not cleared by an UPDATE of every row the run
// wrote (a first run's million rows) either: each MirrorApply stamps its
// rows with the import's next write sequence (mirror_marks.applied), and
// MirrorSettle only records that sequence as settled. A row stamped at
// or below the settled sequence reads as settled.
var mirrorSchema = []string{
	fmt.Sprintf(mirrorKeysDDL, "IF NOT EXISTS mirror_keys"),
	`CREATE TABLE IF NOT EXISTS mirror_marks (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, applied BIGINT NOT NULL, settled BIGINT NOT NULL,
		PRIMARY KEY (project, import))`,
	// Rows of mirror_keys a compaction would drop (mirror_versions.go).
	`ALTER TABLE mirror_marks ADD COLUMN IF NOT EXISTS dead BIGINT DEFAULT 0`,
	// The state's keys a run found, appended (an UPDATE of a seen mark on
	// every row cost DuckDB ~200 µs a row); MirrorSettle empties it.
	strings.Replace(mirrorSeenDDL, "TABLE", "TABLE IF NOT EXISTS", 1),
	// MirrorUnseen's rows, gathered by one anti-join and then paged.
	`CREATE TABLE IF NOT EXISTS mirror_unseen (project BIGINT NOT NULL, import VARCHAR NOT NULL,
		key BLOB NOT NULL, hash BLOB NOT NULL, ref BLOB NOT NULL, flag UTINYINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS mirror_runs (
		project BIGINT NOT NULL, run_id VARCHAR NOT NULL,
		inserted BIGINT NOT NULL, updated BIGINT NOT NULL, deleted BIGINT NOT NULL, unchanged BIGINT NOT NULL,
		PRIMARY KEY (project, run_id))`,
	`ALTER TABLE mirror_runs ADD COLUMN IF NOT EXISTS table_rows BIGINT DEFAULT 0`,
	mirrorSourcesTable,
}

const mirrorSeenDDL = `CREATE TABLE mirror_seen (project BIGINT NOT NULL, import VARCHAR NOT NULL, gen BIGINT NOT NULL, key BLOB NOT NULL)`

// mirrorKeysDDL creates mirror_keys (or a compaction's new copy, %s).
const mirrorKeysDDL = `CREATE TABLE %s (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, key BLOB NOT NULL,
		hash BLOB NOT NULL, ref BLOB NOT NULL, flag UTINYINT NOT NULL, seen BIGINT NOT NULL, wseq BIGINT NOT NULL)`

// mirrorChunk bounds the keys of one statement (its parameter list).
const mirrorChunk = 500

// mirrorPage is how many rows MirrorUnseen reads at a time.
const mirrorPage = 1000

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// mirrorFlag is the SQL of a row's flag as read: settled once its write
// sequence is settled (the first parameter).
const mirrorFlag = `CASE WHEN m.wseq <= ?::BIGINT THEN 0 ELSE m.flag END`

type queryRower interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// keyRange returns the least and greatest of keys: the bounds that let a
// scan of the state skip row groups.
func keyRange(keys [][]byte) (lo, hi []byte) {
	lo, hi = keys[0], keys[0]
	for _, k := range keys[1:] {
		if bytes.Compare(k, lo) < 0 {
			lo = k
		}
		if bytes.Compare(k, hi) > 0 {
			hi = k
		}
	}
	return lo, hi
}

// MirrorLookup implements store.Mirrors. Keys travel as one list of
// hex strings (the driver binds no BLOB lists), joined by hash. Only the
// keys found are recorded as seen: a key the state lacks is either
// written by the run (which stamps it seen) or not in the state at all.
func (s *Store) MirrorLookup(ctx context.Context, project int64, importID string, gen int64, keys [][]byte, fn func(store.MirrorRow) error) error {
	if err := s.enter("mirror lookup"); err != nil {
		return err
	}
	defer s.ops.Done()
	if len(keys) == 0 {
		return nil
	}
	s.mirrorMu.RLock()
	got, err := s.mirrorLookup(ctx, project, importID, gen, keys)
	s.mirrorMu.RUnlock()
	if err != nil {
		return fmt.Errorf("duckstore: mirror lookup: %w", err)
	}
	// fn may use the store: the connection and the lock are released.
	for _, r := range got {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) mirrorLookup(ctx context.Context, project int64, importID string, gen int64, keys [][]byte) ([]store.MirrorRow, error) {
	done, dead, err := mirrorMarks(ctx, s.db, project, importID)
	if err != nil {
		return nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	lo, hi := keyRange(keys)
	release, err := registerView(ctx, conn, mirrorKeysBatch(keys), mirrorKeysView)
	if err != nil {
		return nil, err
	}
	// Only the latest live version of a key is its state; while the
	// import has no dead rows each key has one row, and it is that.
	q := `SELECT m.key, m.hash, m.ref, ` + mirrorFlag + ` FROM mirror_keys m
		WHERE m.project = ?::BIGINT AND m.import = ?::VARCHAR AND m.key BETWEEN ?::BLOB AND ?::BLOB
			AND m.key IN (SELECT k FROM ` + mirrorKeysView + `)`
	args := []any{done, project, importID, lo, hi}
	if dead > 0 {
		q += ` ` + mirrorLatest
	} else {
		q += ` AND ` + mirrorLive
	}
	args = append(args, done)
	got, err := collectRows(ctx, conn, q, args)
	release()
	if err != nil {
		return nil, err
	}
	if gen > 0 && len(got) > 0 {
		found := make([][]byte, len(got))
		for i, r := range got {
			found[i] = r.Key
		}
		release, err := registerView(ctx, conn, mirrorKeysBatch(found), mirrorKeysView)
		if err != nil {
			return nil, err
		}
		_, err = conn.ExecContext(ctx, `INSERT INTO mirror_seen SELECT ?::BIGINT, ?::VARCHAR, ?::BIGINT, k FROM `+mirrorKeysView,
			project, importID, gen)
		release()
		if err != nil {
			return nil, err
		}
	}
	return got, nil
}

type queryer interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// collectRows runs q and returns its rows (key, hash, ref, flag).
func collectRows(ctx context.Context, db queryer, q string, args []any) ([]store.MirrorRow, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var got []store.MirrorRow
	for rows.Next() {
		var r store.MirrorRow
		var flag uint8
		if err := rows.Scan(&r.Key, &r.Hash, &r.Ref, &flag); err != nil {
			return nil, err
		}
		r.Flag = store.MirrorFlag(flag)
		got = append(got, r)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return got, rows.Err()
}

// MirrorApply implements store.Mirrors. Deleting events takes the
// writer lock after the loader applied every acknowledged write (as
// DeleteImportEvents does), so the versions to delete are in the table;
// their keys leave the dedup set once the transaction committed. A
// crash in between is harmless: Open rebuilds the set from the table.
// ctx bounds only the waits; the transaction, once begun, is let finish.
// A loader that keeps failing fails the apply with its error: waiting
// for it (out of memory, say) would hang the run.
func (s *Store) MirrorApply(ctx context.Context, a store.MirrorApply) error {
	if err := s.enter("mirror apply"); err != nil {
		return err
	}
	defer s.ops.Done()
	// The read lock before the writer's: holding the writer's while a
	// compaction of the states (mirrorMu) runs would stop every write.
	s.mirrorMu.RLock()
	locked := true
	defer func() {
		if locked {
			s.mirrorMu.RUnlock()
		}
	}()
	if len(a.DeleteEvents) > 0 {
		select {
		case s.wsem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-s.wsem }()
		if s.broken != nil {
			return fmt.Errorf("duckstore: mirror apply: %w", s.broken)
		}
		if err := s.syncFailFast(ctx); err != nil {
			return fmt.Errorf("duckstore: mirror apply: waiting for acknowledged writes: %w", err)
		}
	}
	err := s.mirrorApplyTx(context.WithoutCancel(ctx), a)
	s.mirrorMu.RUnlock()
	locked = false
	if err != nil {
		return fmt.Errorf("duckstore: mirror apply: %w", err)
	}
	for _, e := range a.DeleteEvents {
		if err := s.keys.remove(e.Key); err != nil {
			s.broken = fmt.Errorf("deleted events' dedup keys could not be removed; restart the server: %w", err)
			return s.broken
		}
	}
	return nil
}

func (s *Store) mirrorApplyTx(ctx context.Context, a store.MirrorApply) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Upserted and removed keys get new versions: rows, tombstones.
	gone := a.Remove
	if len(a.Rows) > 0 {
		gone = make([][]byte, 0, len(a.Remove)+len(a.Rows))
		gone = append(gone, a.Remove...)
		for _, r := range a.Rows {
			gone = append(gone, r.Key)
		}
	}
	// The views are registered outside the transaction (a catalog change
	// of the connection's own) and each is read once.
	if len(gone) > 0 && a.Replaced == nil { // the keys are read only to count what they supersede
		release, err := registerView(ctx, conn, mirrorKeysBatch(gone), mirrorKeysView)
		if err != nil {
			return err
		}
		defer release()
	}
	if len(gone) > 0 {
		release, err := registerView(ctx, conn, mirrorRowsBatch(a.Rows, a.Remove), mirrorRowsView)
		if err != nil {
			return err
		}
		defer release()
	}
	if _, err := conn.ExecContext(ctx, `BEGIN TRANSACTION`); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		}
	}()
	if len(a.DeleteEvents) > 0 {
		ts, his, los := make([]int64, len(a.DeleteEvents)), make([]int64, len(a.DeleteEvents)), make([]int64, len(a.DeleteEvents))
		from, to := a.DeleteEvents[0].TimeMs, a.DeleteEvents[0].TimeMs
		for i, e := range a.DeleteEvents {
			ts[i] = e.TimeMs
			his[i], los[i] = splitKey(e.Key)
			from, to = min(from, e.TimeMs), max(to, e.TimeMs)
		}
		// The time range lets the scan skip row groups by their zone maps.
		if _, err := conn.ExecContext(ctx, `DELETE FROM events WHERE rowid IN (
			SELECT e.rowid FROM events e JOIN (SELECT unnest(?::BIGINT[]) AS t, unnest(?::BIGINT[]) AS hi, unnest(?::BIGINT[]) AS lo) d
				ON e.time_ms = d.t AND e.k_hi = d.hi AND e.k_lo = d.lo
			WHERE e.project = ? AND e.time_ms BETWEEN ? AND ?)`, ts, his, los, a.Project, from, to); err != nil {
			return fmt.Errorf("delete events: %w", err)
		}
	}
	if len(gone) > 0 {
		deadRows := int64(len(a.Remove))
		for _, r := range a.Rows {
			if r.Flag == store.MirrorDeleting {
				deadRows++
			}
		}
		if err := mirrorAppendTx(ctx, conn, mirrorApplyArgs{project: a.Project, importID: a.Import, gen: a.Gen,
			gone: gone, deadRows: deadRows, replaced: a.Replaced}); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, `COMMIT`)
	return err
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// MirrorUnseen implements store.Mirrors: one anti-join of the state and
// the run's seen keys (a hash join DuckDB spills) gathers the unseen
// rows, which are then read a page at a time in key order.
func (s *Store) MirrorUnseen(ctx context.Context, project int64, importID string, gen int64, fn func(store.MirrorRow) error) error {
	if err := s.enter("mirror unseen"); err != nil {
		return err
	}
	defer s.ops.Done()
	s.mirrorMu.RLock()
	err := s.mirrorGatherUnseen(ctx, project, importID, gen)
	s.mirrorMu.RUnlock()
	if err != nil {
		return fmt.Errorf("duckstore: mirror unseen: %w", err)
	}
	after := []byte{}
	for {
		page, err := collectRows(ctx, s.db, `SELECT key, hash, ref, flag FROM mirror_unseen
			WHERE project = ?::BIGINT AND import = ?::VARCHAR AND key > ?::BLOB ORDER BY key LIMIT ?`,
			[]any{project, importID, after, mirrorPage})
		if err != nil {
			return fmt.Errorf("duckstore: mirror unseen: %w", err)
		}
		// fn may call MirrorApply: no lock is held here.
		for _, r := range page {
			after = r.Key
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < mirrorPage {
			break
		}
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM mirror_unseen WHERE project = ? AND import = ?`, project, importID); err != nil {
		return fmt.Errorf("duckstore: mirror unseen: %w", err)
	}
	return nil
}

func (s *Store) mirrorGatherUnseen(ctx context.Context, project int64, importID string, gen int64) error {
	done, dead, err := mirrorMarks(ctx, s.db, project, importID)
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM mirror_unseen WHERE project = ? AND import = ?`, project, importID); err != nil {
		return err
	}
	// The rows the run wrote carry its gen; a first run's state is all
	// of them, and then there is nothing to join.
	var left int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM mirror_keys WHERE project = ? AND import = ? AND seen <> ?`,
		project, importID, gen).Scan(&left); err != nil {
		return err
	}
	if left == 0 {
		return tx.Commit()
	}
	// Of the rows neither written by the run nor seen by it, those that
	// are their key's latest live version. While the import has no dead
	// rows every row is.
	latest := ""
	args := []any{done, project, importID, gen, project, importID, gen, done}
	if dead > 0 {
		latest = ` AND NOT EXISTS (SELECT 1 FROM mirror_keys n WHERE n.project = ?::BIGINT AND n.import = ?::VARCHAR
			AND n.key = m.key AND (n.wseq > m.wseq OR (n.wseq = m.wseq AND n.flag < m.flag)))`
		args = append(args, project, importID)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO mirror_unseen
		SELECT m.project, m.import, m.key, m.hash, m.ref, `+mirrorFlag+` FROM mirror_keys m
		WHERE m.project = ?::BIGINT AND m.import = ?::VARCHAR AND m.seen <> ?::BIGINT
			AND NOT EXISTS (SELECT 1 FROM mirror_seen v WHERE v.project = ?::BIGINT AND v.import = ?::VARCHAR
				AND v.gen = ?::BIGINT AND v.key = m.key)
			AND `+mirrorLive+latest, args...); err != nil {
		return err
	}
	return tx.Commit()
}

// MirrorSettle implements store.Mirrors: the import's writes so far
// become settled (a settled delete reads as no row), the seen marks go,
// and the state is compacted once its dead rows are due.
func (s *Store) MirrorSettle(ctx context.Context, project int64, importID, _ string) error {
	if err := s.enter("mirror settle"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.mirrorSettle(ctx, project, importID); err != nil {
		return fmt.Errorf("duckstore: mirror settle: %w", err)
	}
	// Settled already: a compaction that fails is tried again next time.
	if err := s.maybeCompactMirror(ctx, project, importID); err != nil {
		s.log.Warn("duckstore: compacting Mirror states failed; the next settle tries again", "err", err)
	}
	return nil
}

func (s *Store) mirrorSettle(ctx context.Context, project int64, importID string) error {
	// Alone, so that when no other import has seen marks the table is
	// dropped and made again instead of deleted from: a full read's marks
	// are a row per key of the table, and deleting them would hold
	// DuckDB's version info of every vector (mirror_versions.go).
	s.mirrorMu.Lock()
	defer s.mirrorMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var others int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM mirror_seen WHERE project <> ? OR import <> ? LIMIT 1)`,
		project, importID).Scan(&others); err != nil {
		return err
	}
	stmts := []string{`DELETE FROM mirror_seen WHERE project = ? AND import = ?`}
	if others == 0 {
		stmts = []string{`DROP TABLE mirror_seen`, mirrorSeenDDL}
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q, argsFor(q, project, importID)...); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE mirror_marks SET settled = applied WHERE project = ? AND import = ?`, project, importID); err != nil {
		return err
	}
	return tx.Commit()
}

// argsFor passes args to q only if it has parameters.
func argsFor(q string, args ...any) []any {
	if strings.Contains(q, "?") {
		return args
	}
	return nil
}

// MirrorCount implements store.Mirrors: the keys whose latest row is
// neither a tombstone nor a delete.
func (s *Store) MirrorCount(ctx context.Context, project int64, importID string) (int64, error) {
	if err := s.enter("mirror count"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	s.mirrorMu.RLock()
	defer s.mirrorMu.RUnlock()
	_, dead, err := mirrorMarks(ctx, s.db, project, importID)
	if err != nil {
		return 0, fmt.Errorf("duckstore: mirror count: %w", err)
	}
	q := `SELECT count(*) FROM mirror_keys WHERE project = ? AND import = ? AND flag NOT IN (2, 255)`
	if dead > 0 {
		q = `SELECT count(*) FROM (SELECT m.flag FROM mirror_keys m WHERE m.project = ? AND m.import = ?
			QUALIFY row_number() OVER (PARTITION BY m.key ORDER BY m.wseq DESC, m.flag) = 1) WHERE flag NOT IN (2, 255)`
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, q, project, importID).Scan(&n); err != nil {
		return 0, fmt.Errorf("duckstore: mirror count: %w", err)
	}
	return n, nil
}

// MirrorDrop implements store.Mirrors.
func (s *Store) MirrorDrop(ctx context.Context, project int64, importID string) error {
	if err := s.enter("mirror drop"); err != nil {
		return err
	}
	defer s.ops.Done()
	s.mirrorMu.RLock()
	defer s.mirrorMu.RUnlock()
	for _, table := range []string{"mirror_keys", "mirror_seen", "mirror_unseen", "mirror_marks"} {
		if _, err := s.db.ExecContext(ctx, `DELETE FROM `+table+` WHERE project = ? AND import = ?`, project, importID); err != nil {
			return fmt.Errorf("duckstore: mirror drop: %w", err)
		}
	}
	return nil
}

// MirrorRecordRun implements store.Mirrors.
func (s *Store) MirrorRecordRun(ctx context.Context, project int64, runID string, c store.MirrorCounts) error {
	if err := s.enter("mirror record run"); err != nil {
		return err
	}
	defer s.ops.Done()
	_, err := s.db.ExecContext(ctx, `INSERT INTO mirror_runs (project, run_id, inserted, updated, deleted, unchanged, table_rows) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (project, run_id) DO UPDATE SET inserted = excluded.inserted, updated = excluded.updated,
			deleted = excluded.deleted, unchanged = excluded.unchanged, table_rows = excluded.table_rows`,
		project, runID, c.Inserted, c.Updated, c.Deleted, c.Unchanged, c.Rows)
	if err != nil {
		return fmt.Errorf("duckstore: mirror record run: %w", err)
	}
	return nil
}

// MirrorRunCounts implements store.Mirrors.
func (s *Store) MirrorRunCounts(ctx context.Context, project int64, runIDs []string) (map[string]store.MirrorCounts, error) {
	if err := s.enter("mirror run counts"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	out := map[string]store.MirrorCounts{}
	for len(runIDs) > 0 {
		n := min(len(runIDs), mirrorChunk)
		args := []any{project}
		for _, id := range runIDs[:n] {
			args = append(args, id)
		}
		rows, err := s.db.QueryContext(ctx, `SELECT run_id, inserted, updated, deleted, unchanged, coalesce(table_rows, 0) FROM mirror_runs
			WHERE project = ? AND run_id IN (`+placeholders(n)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("duckstore: mirror run counts: %w", err)
		}
		for rows.Next() {
			var id string
			var c store.MirrorCounts
			if err := rows.Scan(&id, &c.Inserted, &c.Updated, &c.Deleted, &c.Unchanged, &c.Rows); err != nil {
				rows.Close()
				return nil, fmt.Errorf("duckstore: mirror run counts: %w", err)
			}
			out[id] = c
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("duckstore: mirror run counts: %w", err)
		}
		runIDs = runIDs[n:]
	}
	return out, nil
}
