package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// ReplaceLookup implements store.Lookups in one transaction: the table's
// row in lookup_tables is written first, which row-locks it, so two
// replacements of one table (from any processes) take turns and the second
// deletes exactly what the first stored.
func (s *Store) ReplaceLookup(ctx context.Context, project int64, id string, t *lookup.Table) error {
	if err := s.enter("replace lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	cols, err := json.Marshal(t.Columns())
	if err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	defer rollback(ctx, tx)
	if _, err := tx.Exec(ctx, `INSERT INTO lookup_tables (project, id, columns, row_count, updated_ms) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (project, id) DO UPDATE SET columns = excluded.columns, row_count = excluded.row_count, updated_ms = excluded.updated_ms`,
		project, id, string(cols), int64(t.Len()), time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM lookup_rows WHERE project = $1 AND table_id = $2`, project, id); err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	i := 0
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"lookup_rows"}, []string{"project", "table_id", "key", "row"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == t.Len() {
				return nil, nil
			}
			i++
			return []any{project, id, t.Key(i - 1), t.Row(i - 1)}, nil
		}))
	if err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	return nil
}

// ScanLookup implements store.Lookups. The pages share one read-only
// snapshot, so a scan never mixes rows of two versions of the table.
func (s *Store) ScanLookup(ctx context.Context, project int64, id string, fn func(key string, row []byte) error) error {
	if err := s.enter("scan lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgstore: scan lookup table: %w", err)
	}
	defer rollback(ctx, tx)
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM lookup_tables WHERE project = $1 AND id = $2`, project, id).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("lookup table %q: %w", id, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("pgstore: scan lookup table: %w", err)
	}
	const cols = `SELECT key, row FROM lookup_rows WHERE project = $1 AND table_id = $2`
	limit := fmt.Sprintf(` ORDER BY key LIMIT %d`, s.pages.lookups)
	var key string
	args := []any{project, id}
	for page := cols + limit; ; page = cols + ` AND key > $3` + limit {
		rows, err := tx.Query(ctx, page, args...)
		if err != nil {
			return fmt.Errorf("pgstore: scan lookup table: %w", err)
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(&key, nil); err != nil {
				rows.Close()
				return fmt.Errorf("pgstore: scan lookup table: %w", err)
			}
			n++
			// The row stays in the driver's buffer: valid during fn only.
			if err := fn(key, rows.RawValues()[1]); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pgstore: scan lookup table: %w", err)
		}
		if n < s.pages.lookups {
			return nil
		}
		args = append(args[:2], key)
	}
}
