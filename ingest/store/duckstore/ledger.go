package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"

	"github.com/tributary-dev/tributary/ingest/store"
)

// The row-level ledger and the quarantine (store.Ledger). Ledger entries
// go through the write log like records (ledger_log.go): AddLedger logs
// them in one entry and the loader inserts them in its own transaction,
// so they neither compete with the loader for DuckDB's memory nor pay a
// small transaction's WAL copy and checkpoint. A run's constants
// (project, import, run, start) are one row of sync_ledger_runs; an
// entry is its run's number, 64 bits of the key hash and the outcome
// (sync_ledger_rows), a refusal the same with field and reason
// (sync_ledger_refused). Lookups by key scan the key column, which a
// columnar scan of a retention period's entries does in milliseconds.
// The quarantine has one row per key; a refusal again replaces it
// (delete, then append).

var ledgerTables = []string{
	// The ledger's first layout (one wide row per entry) never shipped.
	`DROP TABLE IF EXISTS sync_ledger`,
	`CREATE TABLE IF NOT EXISTS sync_ledger_runs (
		run_no BIGINT PRIMARY KEY, project BIGINT NOT NULL, import VARCHAR NOT NULL, run VARCHAR NOT NULL, at_ms BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS sync_ledger_rows (run_no BIGINT NOT NULL, key BIGINT NOT NULL, outcome UTINYINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS sync_ledger_refused (
		run_no BIGINT NOT NULL, key BIGINT NOT NULL, field VARCHAR NOT NULL, reason VARCHAR NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS sync_quarantine (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, key_hash BLOB NOT NULL, key VARCHAR NOT NULL,
		run VARCHAR NOT NULL, at_ms BIGINT NOT NULL, field VARCHAR NOT NULL, reason VARCHAR NOT NULL, row BLOB NOT NULL)`,
}

// AddLedger implements store.Ledger: the entries are logged (and so
// durable) on return; the quarantine rows, rare, are written at once.
func (s *Store) AddLedger(ctx context.Context, run store.LedgerRun, entries []store.LedgerEntry, quarantine []store.QuarantineRow) (err error) {
	if len(entries) == 0 && len(quarantine) == 0 {
		return nil
	}
	if err := s.enter("add ledger"); err != nil {
		return err
	}
	defer s.ops.Done()
	defer func() {
		if err != nil {
			err = fmt.Errorf("duckstore: add ledger: %w", err)
		}
	}()
	if err := s.logLedger(ctx, run, entries); err != nil {
		return err
	}
	if len(quarantine) == 0 {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN TRANSACTION`); err != nil {
		return err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	for i := range quarantine {
		if _, err := conn.ExecContext(ctx, `DELETE FROM sync_quarantine WHERE project = ? AND import = ? AND key_hash = ?`,
			run.Project, run.Import, hashBytes(&quarantine[i].Hash)); err != nil {
			return err
		}
	}
	err = appendRows(conn, "sync_quarantine", len(quarantine), func(i int) []driver.Value {
		q := &quarantine[i]
		return []driver.Value{run.Project, run.Import, hashBytes(&q.Hash), q.Key, q.Run, q.AtMs, q.Field, q.Reason, q.Row}
	})
	if err != nil {
		return err
	}
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), `COMMIT`); err != nil {
		return err
	}
	committed = true
	return nil
}

// LedgerHistory implements store.Ledger. It waits for the loader, so it
// sees every entry AddLedger acknowledged.
func (s *Store) LedgerHistory(ctx context.Context, project int64, importID string, hash [16]byte, limit int) ([]store.LedgerLine, error) {
	if err := s.enter("ledger history"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	if err := s.Sync(ctx); err != nil {
		return nil, fmt.Errorf("duckstore: ledger history: %w", err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT r.run, r.at_ms, e.outcome, e.field, e.reason FROM (
			SELECT run_no, outcome, '' AS field, '' AS reason FROM sync_ledger_rows WHERE key = $1
			UNION ALL SELECT run_no, `+strconv.Itoa(int(store.OutcomeRefused))+`, field, reason FROM sync_ledger_refused WHERE key = $1) e
		JOIN sync_ledger_runs r USING (run_no) WHERE r.project = $2 AND r.import = $3
		ORDER BY r.at_ms DESC, r.run DESC LIMIT $4`, ledgerKey(hash[:]), project, importID, limit)
	if err != nil {
		return nil, fmt.Errorf("duckstore: ledger history: %w", err)
	}
	defer rows.Close()
	var out []store.LedgerLine
	for rows.Next() {
		var e store.LedgerLine
		var o uint8
		if err := rows.Scan(&e.Run, &e.AtMs, &o, &e.Field, &e.Reason); err != nil {
			return nil, fmt.Errorf("duckstore: ledger history: %w", err)
		}
		e.Outcome = store.Outcome(o)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: ledger history: %w", err)
	}
	return out, nil
}

// Quarantined implements store.Ledger.
func (s *Store) Quarantined(ctx context.Context, project int64, importID string, after *[16]byte, limit int) ([]store.QuarantineRow, error) {
	if err := s.enter("quarantined"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	var from []byte
	if after != nil {
		from = hashBytes(after)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key_hash, key, run, at_ms, field, reason, row FROM sync_quarantine
		WHERE project = ? AND import = ? AND (? IS NULL OR key_hash > ?) ORDER BY key_hash LIMIT ?`, project, importID, from, from, limit)
	if err != nil {
		return nil, fmt.Errorf("duckstore: quarantined: %w", err)
	}
	return scanQuarantine(rows)
}

func scanQuarantine(rows *sql.Rows) ([]store.QuarantineRow, error) {
	defer rows.Close()
	var out []store.QuarantineRow
	for rows.Next() {
		var q store.QuarantineRow
		var h []byte
		if err := rows.Scan(&h, &q.Key, &q.Run, &q.AtMs, &q.Field, &q.Reason, &q.Row); err != nil {
			return nil, fmt.Errorf("quarantined: %w", err)
		}
		copy(q.Hash[:], h)
		out = append(out, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("quarantined: %w", err)
	}
	return out, nil
}

// Unquarantine implements store.Ledger.
func (s *Store) Unquarantine(ctx context.Context, project int64, importID string, hashes [][16]byte) error {
	if len(hashes) == 0 {
		return nil
	}
	if err := s.enter("unquarantine"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("duckstore: unquarantine: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, h := range hashes {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sync_quarantine WHERE project = ? AND import = ? AND key_hash = ?`, project, importID, hashBytes(&h)); err != nil {
			return fmt.Errorf("duckstore: unquarantine: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("duckstore: unquarantine: %w", err)
	}
	return nil
}

// PruneLedger implements store.Ledger.
func (s *Store) PruneLedger(ctx context.Context, beforeMs int64) (int64, error) {
	if err := s.enter("prune ledger"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	fail := func(err error) (int64, error) { return 0, fmt.Errorf("duckstore: prune ledger: %w", err) }
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback() }()
	// Runs go first, then every entry without a run row: also those a run
	// still loading wrote after an earlier prune took its row (the loader
	// inserts it again after a prune, but not for entries already written).
	// LedgerHistory, a join, never shows such entries.
	if _, err := tx.ExecContext(ctx, `DELETE FROM sync_ledger_runs WHERE at_ms < ?`, beforeMs); err != nil {
		return fail(err)
	}
	const orphan = ` WHERE run_no NOT IN (SELECT run_no FROM sync_ledger_runs)`
	var n int64
	// Entries and quarantine rows count; runs do not.
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM sync_ledger_rows` + orphan, nil},
		{`DELETE FROM sync_ledger_refused` + orphan, nil},
		{`DELETE FROM sync_quarantine WHERE at_ms < ?`, []any{beforeMs}},
	} {
		res, err := tx.ExecContext(ctx, q.sql, q.args...)
		if err != nil {
			return fail(err)
		}
		if k, err := res.RowsAffected(); err == nil {
			n += k
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	// After the commit: the loader's next insert puts the rows of runs
	// still loading back.
	s.ledgerPrunes.Add(1)
	return n, nil
}

// hashBytes copies a key hash out of its struct: cgo refuses a pointer
// into memory that holds other Go pointers (the entry's strings).
func hashBytes(h *[16]byte) []byte { return append([]byte(nil), h[:]...) }
