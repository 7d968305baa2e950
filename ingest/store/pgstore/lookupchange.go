package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

// ChangeLookup implements store.LookupChanges in one transaction. The
// table's row in lookup_tables is written first, which row-locks it, so
// a change and a replacement of one table take turns (as two
// replacements do).
func (s *Store) ChangeLookup(ctx context.Context, project int64, id string, rows store.LookupRows, del []string) error {
	if err := s.enter("change lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.changeLookup(ctx, project, id, rows, del); err != nil {
		return fmt.Errorf("pgstore: change lookup table %q: %w", id, err)
	}
	return nil
}

func (s *Store) changeLookup(ctx context.Context, project int64, id string, rows store.LookupRows, del []string) error {
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
		ON CONFLICT (project, id) DO UPDATE SET columns = excluded.columns, updated_ms = excluded.updated_ms`,
		project, id, string(cols), time.Now().UnixMilli()); err != nil {
		return err
	}
	const drop = `DELETE FROM lookup_rows WHERE project = $1 AND table_id = $2 AND key = ANY($3)`
	for {
		b, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, drop, project, id, b.Keys()); err != nil {
			return err
		}
		if err := copyLookupBatch(ctx, tx, project, id, b); err != nil {
			return err
		}
	}
	if len(del) > 0 {
		if _, err := tx.Exec(ctx, drop, project, id, del); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE lookup_tables SET row_count = (SELECT count(*) FROM lookup_rows WHERE project = $1 AND table_id = $2)
		WHERE project = $1 AND id = $2`, project, id); err != nil {
		return err
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	return tx.Commit(context.WithoutCancel(ctx))
}
