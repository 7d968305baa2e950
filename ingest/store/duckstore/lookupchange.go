package duckstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tributary-dev/tributary/ingest/store"
)

// ChangeLookup implements store.LookupChanges in one DuckDB transaction:
// each batch's keys are deleted and its rows inserted (lookup_rows has
// no primary key, so a delete and re-insert of a key in one transaction
// is allowed), then del's keys go and the table's row count is taken.
func (s *Store) ChangeLookup(ctx context.Context, project int64, id string, rows store.LookupRows, del []string) error {
	if err := s.enter("change lookup table"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.changeLookup(ctx, project, id, rows, del); err != nil {
		return fmt.Errorf("duckstore: change lookup table %q: %w", id, err)
	}
	return nil
}

func (s *Store) changeLookup(ctx context.Context, project int64, id string, rows store.LookupRows, del []string) error {
	cols, err := json.Marshal(rows.Columns())
	if err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	const drop = `DELETE FROM lookup_rows WHERE project = ?::BIGINT AND table_id = ?::VARCHAR AND key IN (SELECT unnest(?::VARCHAR[]))`
	var keys, vals []string
	for {
		b, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		keys, vals = keys[:0], vals[:0]
		for i := range b.Len() {
			keys = append(keys, b.Key(i))
			vals = append(vals, string(b.Row(i)))
		}
		if _, err := tx.ExecContext(ctx, drop, project, id, keys); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO lookup_rows SELECT ?::BIGINT, ?::VARCHAR, unnest(?::VARCHAR[]), unnest(?::VARCHAR[])`,
			project, id, keys, vals); err != nil {
			return err
		}
	}
	for start := 0; start < len(del); start += lookupChangeChunk {
		if _, err := tx.ExecContext(ctx, drop, project, id, del[start:min(start+lookupChangeChunk, len(del))]); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM lookup_tables WHERE project = ? AND id = ?`, project, id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO lookup_tables SELECT ?::BIGINT, ?::VARCHAR, ?::VARCHAR, count(*), ?::BIGINT
		FROM lookup_rows WHERE project = ?::BIGINT AND table_id = ?::VARCHAR`, project, id, string(cols), nowMs(), project, id); err != nil {
		return err
	}
	// Interrupting a COMMIT would leave its outcome unknown.
	return tx.Commit()
}

// lookupChangeChunk bounds the deleted keys of one statement.
const lookupChangeChunk = 16384
