package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// ReplaceLookup implements store.Lookups in one transaction: the table's
// row in lookup_tables is written first, which row-locks it, so two
// replacements of one table (from any processes) take turns and the second
// deletes exactly what the first stored. Each batch is checked for keys
// already stored (the primary key would refuse them, but without naming
// the row) and copied in; row_count is set once all are in.
func (s *Store) ReplaceLookup(ctx context.Context, project int64, id string, rows store.LookupRows) error {
	if err := s.enter("replace lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.replaceLookup(ctx, project, id, rows); err != nil {
		return fmt.Errorf("pgstore: replace lookup table %q: %w", id, err)
	}
	return nil
}

func (s *Store) replaceLookup(ctx context.Context, project int64, id string, rows store.LookupRows) error {
	cols, err := json.Marshal(rows.Columns())
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer rollback(ctx, tx)
	if _, err := tx.Exec(ctx, `INSERT INTO lookup_tables (project, id, columns, row_count, updated_ms) VALUES ($1, $2, $3, 0, $4)
		ON CONFLICT (project, id) DO UPDATE SET columns = excluded.columns, row_count = 0, updated_ms = excluded.updated_ms`,
		project, id, string(cols), time.Now().UnixMilli()); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM lookup_rows WHERE project = $1 AND table_id = $2`, project, id); err != nil {
		return err
	}
	var n int64
	for {
		b, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if n > 0 { // the first batch meets an empty table
			found, err := tx.Query(ctx, `SELECT key FROM lookup_rows WHERE project = $1 AND table_id = $2 AND key = ANY($3)`, project, id, b.Keys())
			if err != nil {
				return err
			}
			stored, err := pgx.CollectRows(found, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if err := b.Duplicate(stored); err != nil {
				return err
			}
		}
		if err := copyLookupBatch(ctx, tx, project, id, b); err != nil {
			return err
		}
		n += int64(b.Len())
	}
	if _, err := tx.Exec(ctx, `UPDATE lookup_tables SET row_count = $3 WHERE project = $1 AND id = $2`, project, id, n); err != nil {
		return err
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	return tx.Commit(context.WithoutCancel(ctx))
}

// copyLookupBatch appends b's rows to table id's rows in tx.
func copyLookupBatch(ctx context.Context, tx pgx.Tx, project int64, id string, b *lookup.Batch) error {
	i := 0
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"lookup_rows"}, []string{"project", "table_id", "key", "row"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == b.Len() {
				return nil, nil
			}
			i++
			return []any{project, id, b.Key(i - 1), b.Row(i - 1)}, nil
		}))
	return err
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
