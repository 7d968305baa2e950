package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// The row-level ledger and the quarantine (store.Ledger). The ledger is
// append-only and appended with the Appender, one transaction per flush
// of a run's entries; lookups by key hash scan it, which a columnar scan
// of a retention period's entries does in milliseconds. The quarantine
// has one row per key; a refusal again replaces it (delete, then append).

var ledgerTables = []string{
	`CREATE TABLE IF NOT EXISTS sync_ledger (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, key_hash BLOB NOT NULL, key VARCHAR NOT NULL,
		run VARCHAR NOT NULL, at_ms BIGINT NOT NULL, outcome UTINYINT NOT NULL, field VARCHAR NOT NULL, reason VARCHAR NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS sync_quarantine (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, key_hash BLOB NOT NULL, key VARCHAR NOT NULL,
		run VARCHAR NOT NULL, at_ms BIGINT NOT NULL, field VARCHAR NOT NULL, reason VARCHAR NOT NULL, row BLOB NOT NULL)`,
}

// AddLedger implements store.Ledger.
func (s *Store) AddLedger(ctx context.Context, project int64, importID string, entries []store.LedgerEntry, quarantine []store.QuarantineRow) (err error) {
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
	if err := appendLedger(ctx, conn, project, importID, entries); err != nil {
		return err
	}
	for i := range quarantine {
		if _, err := conn.ExecContext(ctx, `DELETE FROM sync_quarantine WHERE project = ? AND import = ? AND key_hash = ?`,
			project, importID, hashBytes(&quarantine[i].Hash)); err != nil {
			return err
		}
	}
	err = appendRows(conn, "sync_quarantine", len(quarantine), func(i int) []driver.Value {
		q := &quarantine[i]
		return []driver.Value{project, importID, hashBytes(&q.Hash), q.Key, q.Run, q.AtMs, q.Field, q.Reason, q.Row}
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

// LedgerHistory implements store.Ledger.
func (s *Store) LedgerHistory(ctx context.Context, project int64, importID string, hash [16]byte, limit int) ([]store.LedgerEntry, error) {
	if err := s.enter("ledger history"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT key_hash, key, run, at_ms, outcome, field, reason FROM sync_ledger
		WHERE project = ? AND import = ? AND key_hash = ? ORDER BY at_ms DESC, run DESC LIMIT ?`, project, importID, hashBytes(&hash), limit)
	if err != nil {
		return nil, fmt.Errorf("duckstore: ledger history: %w", err)
	}
	defer rows.Close()
	var out []store.LedgerEntry
	for rows.Next() {
		var e store.LedgerEntry
		var h []byte
		var o uint8
		if err := rows.Scan(&h, &e.Key, &e.Run, &e.AtMs, &o, &e.Field, &e.Reason); err != nil {
			return nil, fmt.Errorf("duckstore: ledger history: %w", err)
		}
		copy(e.Hash[:], h)
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
	var n int64
	for _, table := range []string{"sync_ledger", "sync_quarantine"} {
		res, err := s.db.ExecContext(ctx, `DELETE FROM `+table+` WHERE at_ms < ?`, beforeMs)
		if err != nil {
			return n, fmt.Errorf("duckstore: prune ledger: %w", err)
		}
		if k, err := res.RowsAffected(); err == nil {
			n += k
		}
	}
	return n, nil
}

// hashBytes copies a key hash out of its struct: cgo refuses a pointer
// into memory that holds other Go pointers (the entry's strings).
func hashBytes(h *[16]byte) []byte { return append([]byte(nil), h[:]...) }
