package duckstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// deleteChunk bounds the events one deletion transaction removes: its
// keys are held in memory (DuckDB materialises RETURNING) until the
// commit, after which they leave the dedup set.
const deleteChunk = 100_000

// DeleteImportEvents implements store.ImportData. It goes chunk by
// chunk, each under the writer lock (which guards the dedup set) after
// the loader has applied every acknowledged write, so no event of the
// import waits in the log: a chunk's keys leave the set only once its
// DELETE is committed. A crash in between is harmless, because Open
// rebuilds the set from the table. Writes proceed between chunks.
func (s *Store) DeleteImportEvents(ctx context.Context, project int64, importID string) (int64, error) {
	if err := s.enter("delete import events"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	var total int64
	for {
		n, err := s.deleteImportChunk(ctx, project, importID)
		total += n
		if err != nil {
			return total, fmt.Errorf("duckstore: delete events of import %q: %w", importID, err)
		}
		if n < deleteChunk {
			return total, nil
		}
	}
}

func (s *Store) deleteImportChunk(ctx context.Context, project int64, importID string) (int64, error) {
	select {
	case s.wsem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-s.wsem }()
	if s.broken != nil {
		return 0, s.broken
	}
	if err := s.Sync(ctx); err != nil {
		return 0, fmt.Errorf("waiting for acknowledged writes: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	// contains() spares the JSON parse of events that cannot match; the
	// path names the top-level key, so a nested object never matches. A
	// sync's events have the key in their common properties (common.go).
	const isImport = `contains(props, '"` + store.ImportIDProperty + `"')
		AND json_extract_string(props, '$."` + store.ImportIDProperty + `"') = ?`
	rows, err := tx.QueryContext(ctx, `DELETE FROM events WHERE rowid IN (
		SELECT rowid FROM events WHERE project = ? AND (`+isImport+`
			OR common IN (SELECT id FROM common_props WHERE `+isImport+`)) LIMIT ?)
		RETURNING k_hi, k_lo`, project, importID, importID, deleteChunk)
	if err != nil {
		return 0, err
	}
	var keys []store.Key
	var n int64
	for rows.Next() {
		var hi, lo sql.NullInt64
		if err := rows.Scan(&hi, &lo); err != nil {
			rows.Close()
			return 0, err
		}
		n++
		if hi.Valid {
			keys = append(keys, joinKey(hi.Int64, lo.Int64))
		}
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := s.keys.remove(k); err != nil {
			// The events are gone but their keys would drop them as
			// duplicates if sent again; a restart rebuilds the set.
			s.broken = fmt.Errorf("deleted events' dedup keys could not be removed; restart the server: %w", err)
			return n, s.broken
		}
	}
	return n, nil
}
