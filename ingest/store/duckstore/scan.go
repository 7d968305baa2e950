package duckstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/ingest/store"
)

// ctxCheckRows bounds how many rows are delivered between ctx checks;
// database/sql notices cancellation only asynchronously.
const ctxCheckRows = 256

// ScanEvents streams matching events; see store.Store. Rows go straight
// from the driver to fn one at a time, with Props in a reused buffer.
func (s *Store) ScanEvents(ctx context.Context, q store.Scan, fn func(*store.Event) error) error {
	if err := s.enter("scan"); err != nil {
		return err
	}
	defer s.ops.Done()

	var b strings.Builder
	b.WriteString(`SELECT name, distinct_id, time_ms, coalesce(insert_id, ''), props, ingest_ms,
		coalesce(k_hi, 0), coalesce(k_lo, 0)
		FROM events WHERE project = ? AND time_ms >= ? AND time_ms < ?`)
	args := make([]any, 0, 4+len(q.Events))
	args = append(args, q.Project, q.FromMs, q.ToMs)
	if len(q.Events) > 0 {
		b.WriteString(` AND name IN (?`)
		b.WriteString(strings.Repeat(`, ?`, len(q.Events)-1))
		b.WriteString(`)`)
		for _, name := range q.Events {
			args = append(args, name)
		}
	}
	b.WriteString(` ORDER BY time_ms, seq`)
	if q.Limit > 0 {
		b.WriteString(` LIMIT ?`)
		args = append(args, q.Limit)
	}

	rows, err := s.db.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return fmt.Errorf("duckstore: scan: %w", err)
	}
	defer rows.Close()
	var (
		e      store.Event
		props  sql.RawBytes
		hi, lo int64
	)
	for n := 0; rows.Next(); n++ {
		if n%ctxCheckRows == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("duckstore: scan: %w", err)
			}
		}
		// Strings scan without a copy (the driver already made them);
		// props reuse one buffer.
		if err := rows.Scan(&e.Name, &e.DistinctID, &e.TimeMs, &e.InsertID, &props, &e.IngestMs, &hi, &lo); err != nil {
			return fmt.Errorf("duckstore: scan: %w", err)
		}
		e.Props = props
		e.Key = store.Key{}
		if e.InsertID != "" {
			e.Key = joinKey(hi, lo)
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duckstore: scan: %w", err)
	}
	// database/sql may end the loop early on cancellation without an error.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("duckstore: scan: %w", err)
	}
	return nil
}

// ScanMerges streams the merges of a project in arrival order. It exists for
// identity handling and the conformance suite; the Store interface has no
// reader for merges yet.
func (s *Store) ScanMerges(ctx context.Context, project int64, fn func(*store.Merge) error) error {
	if err := s.enter("scan merges"); err != nil {
		return err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT distinct_id_1, distinct_id_2, time_ms, ingest_ms, props
		FROM merges WHERE project = ? ORDER BY seq`, project)
	if err != nil {
		return fmt.Errorf("duckstore: scan merges: %w", err)
	}
	defer rows.Close()
	var (
		m     store.Merge
		props sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&m.DistinctIDs[0], &m.DistinctIDs[1], &m.TimeMs, &m.IngestMs, &props); err != nil {
			return fmt.Errorf("duckstore: scan merges: %w", err)
		}
		m.Props = props
		if err := fn(&m); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duckstore: scan merges: %w", err)
	}
	return nil
}
