package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// The row-level ledger and the quarantine (store.Ledger, ledgerMigration).
// Ledger entries go in with COPY; a key's history is an index lookup on
// (project, import, key_hash). The quarantine keeps one row per key.

// ledgerMigration creates the ledger and the quarantine.
const ledgerMigration = `CREATE TABLE sync_ledger (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		key_hash bytea NOT NULL,
		key text NOT NULL,
		run text COLLATE "C" NOT NULL,
		at_ms bigint NOT NULL,
		outcome smallint NOT NULL,
		field text NOT NULL DEFAULT '',
		reason text NOT NULL DEFAULT '');
	CREATE INDEX sync_ledger_key ON sync_ledger (project, import, key_hash, at_ms DESC);
	CREATE INDEX sync_ledger_age ON sync_ledger (at_ms);
	CREATE TABLE sync_quarantine (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		key_hash bytea NOT NULL,
		key text NOT NULL,
		run text NOT NULL,
		at_ms bigint NOT NULL,
		field text NOT NULL,
		reason text NOT NULL,
		row bytea NOT NULL,
		PRIMARY KEY (project, import, key_hash));
	CREATE INDEX sync_quarantine_age ON sync_quarantine (at_ms);`

// ledgerKeyMigration drops the ledger's copy of each key's text: an
// entry is found by its hash, and whoever asks knows the key.
const ledgerKeyMigration = `ALTER TABLE sync_ledger DROP COLUMN key`

// AddLedger implements store.Ledger.
func (s *Store) AddLedger(ctx context.Context, run store.LedgerRun, entries []store.LedgerEntry, quarantine []store.QuarantineRow) error {
	if len(entries) == 0 && len(quarantine) == 0 {
		return nil
	}
	if err := s.enter("add ledger"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: add ledger: %w", err)
	}
	defer rollback(ctx, tx)
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"sync_ledger"},
		[]string{"project", "import", "key_hash", "run", "at_ms", "outcome", "field", "reason"},
		pgx.CopyFromSlice(len(entries), func(i int) ([]any, error) {
			e := &entries[i]
			return []any{run.Project, run.Import, e.Hash[:], run.Run, run.AtMs, int16(e.Outcome), e.Field, e.Reason}, nil
		}))
	if err != nil {
		return fmt.Errorf("pgstore: add ledger: %w", err)
	}
	for i := range quarantine {
		q := &quarantine[i]
		if _, err := tx.Exec(ctx, `INSERT INTO sync_quarantine (project, import, key_hash, key, run, at_ms, field, reason, row)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (project, import, key_hash) DO UPDATE SET
			key = EXCLUDED.key, run = EXCLUDED.run, at_ms = EXCLUDED.at_ms, field = EXCLUDED.field, reason = EXCLUDED.reason, row = EXCLUDED.row`,
			run.Project, run.Import, q.Hash[:], q.Key, q.Run, q.AtMs, q.Field, q.Reason, q.Row); err != nil {
			return fmt.Errorf("pgstore: add ledger: quarantine: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: add ledger: %w", err)
	}
	return nil
}

// LedgerHistory implements store.Ledger.
func (s *Store) LedgerHistory(ctx context.Context, project int64, importID string, hash [16]byte, limit int) ([]store.LedgerLine, error) {
	if err := s.enter("ledger history"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT run, at_ms, outcome, field, reason FROM sync_ledger
		WHERE project = $1 AND import = $2 AND key_hash = $3 ORDER BY at_ms DESC, run DESC LIMIT $4`, project, importID, hash[:], limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: ledger history: %w", err)
	}
	var out []store.LedgerLine
	var e store.LedgerLine
	var o int16
	_, err = pgx.ForEachRow(rows, []any{&e.Run, &e.AtMs, &o, &e.Field, &e.Reason}, func() error {
		e.Outcome = store.Outcome(o)
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: ledger history: %w", err)
	}
	return out, nil
}

// Quarantined implements store.Ledger.
func (s *Store) Quarantined(ctx context.Context, project int64, importID string, after *[16]byte, limit int) ([]store.QuarantineRow, error) {
	if err := s.enter("quarantined"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	from := []byte{}
	if after != nil {
		from = after[:]
	}
	rows, err := s.pool.Query(ctx, `SELECT key_hash, key, run, at_ms, field, reason, row FROM sync_quarantine
		WHERE project = $1 AND import = $2 AND key_hash > $3 ORDER BY key_hash LIMIT $4`, project, importID, from, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: quarantined: %w", err)
	}
	var out []store.QuarantineRow
	var q store.QuarantineRow
	var h []byte
	_, err = pgx.ForEachRow(rows, []any{&h, &q.Key, &q.Run, &q.AtMs, &q.Field, &q.Reason, &q.Row}, func() error {
		copy(q.Hash[:], h)
		q.Row = append([]byte(nil), q.Row...)
		out = append(out, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: quarantined: %w", err)
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
	hs := make([][]byte, len(hashes))
	for i := range hashes {
		hs[i] = hashes[i][:]
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM sync_quarantine WHERE project = $1 AND import = $2 AND key_hash = ANY($3)`,
		project, importID, hs); err != nil {
		return fmt.Errorf("pgstore: unquarantine: %w", err)
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
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE at_ms < $1`, beforeMs)
		if err != nil {
			return n, fmt.Errorf("pgstore: prune ledger: %w", err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
