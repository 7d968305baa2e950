package duckstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Common properties (store.Batch.Common) are stored once, in common_props,
// and each event names its object by id in events.common. A sync run's
// four tags are about a quarter of a synced event's bytes; kept in every
// row they cost the log, the loader's copy and DuckDB's compression each
// time. Scans splice them back (store.SpliceProps), so readers see the
// same events either way.
//
// An object's id is derived from its bytes (the first free one from their
// hash on), by the loader inside the transaction that stores the first
// event using it, so replaying a log entry after a crash finds or makes
// the same row: exactly once, like the events themselves.

// commonProps caches common_props. The loader adds to it; scans read it.
type commonProps struct {
	mu   sync.Mutex
	byID map[int64][]byte // committed rows, and those of the loader's open transaction
	ids  map[string]int64
	open []int64 // inserted by the loader's open transaction

	// The loader's last answer: a sync's entries all name one object.
	last   []byte
	lastID int64
}

func (cp *commonProps) get(id int64) ([]byte, bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	b, ok := cp.byID[id]
	return b, ok
}

func (cp *commonProps) put(id int64, b []byte, open bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.byID == nil {
		cp.byID, cp.ids = map[int64][]byte{}, map[string]int64{}
	}
	cp.byID[id] = b
	cp.ids[string(b)] = id
	if open {
		cp.open = append(cp.open, id)
	}
}

// settle ends the loader's transaction: its rows are now committed, or
// forgotten if it rolled back.
func (cp *commonProps) settle(committed bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if !committed {
		for _, id := range cp.open {
			delete(cp.ids, string(cp.byID[id]))
			delete(cp.byID, id)
		}
		cp.last, cp.lastID = cp.last[:0], 0
	}
	cp.open = cp.open[:0]
}

// cached returns the id of b when it is the object the loader's last
// commonID call answered for: then no database access is needed.
func (cp *commonProps) cached(b []byte) (int64, bool) {
	if cp.lastID != 0 && bytes.Equal(b, cp.last) {
		return cp.lastID, true
	}
	return 0, false
}

// commonID returns the id of the common object b, inserting it on c (the
// loader's connection, inside its transaction) if the table lacks it.
func (s *Store) commonID(ctx context.Context, c *duckdb.Conn, b []byte) (int64, error) {
	cp := &s.common
	if id, ok := cp.cached(b); ok {
		return id, nil
	}
	cp.mu.Lock()
	id, ok := cp.ids[string(b)]
	cp.mu.Unlock()
	if !ok {
		var err error
		if id, err = findOrInsertCommon(ctx, c, cp, b); err != nil {
			return 0, fmt.Errorf("common properties: %w", err)
		}
	}
	cp.last, cp.lastID = append(cp.last[:0], b...), id
	return id, nil
}

func findOrInsertCommon(ctx context.Context, c *duckdb.Conn, cp *commonProps, b []byte) (int64, error) {
	h := fnv.New64a()
	h.Write(b)
	// Positive and never 0, which scans read as "none".
	for id := int64(h.Sum64()>>2) | 1; ; id += 2 {
		got, known := cp.get(id)
		if !known {
			v, found, err := queryCommon(ctx, c, id)
			if err != nil {
				return 0, err
			}
			if !found {
				own := bytes.Clone(b)
				if _, err := c.ExecContext(ctx, `INSERT INTO common_props VALUES (?, ?)`,
					[]driver.NamedValue{{Ordinal: 1, Value: id}, {Ordinal: 2, Value: string(own)}}); err != nil {
					return 0, err
				}
				cp.put(id, own, true)
				return id, nil
			}
			got = v
			cp.put(id, got, false)
		}
		if bytes.Equal(got, b) {
			return id, nil
		}
		// Another object took this id: probe on, as every replay will.
	}
}

func queryCommon(ctx context.Context, c *duckdb.Conn, id int64) ([]byte, bool, error) {
	rows, err := c.QueryContext(ctx, `SELECT props FROM common_props WHERE id = ?`, []driver.NamedValue{{Ordinal: 1, Value: id}})
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	switch err := rows.Next(dest); {
	case errors.Is(err, io.EOF):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	v, ok := dest[0].(string)
	if !ok {
		return nil, false, fmt.Errorf("id %d: props is %T", id, dest[0])
	}
	return []byte(v), true, nil
}

// commonProps returns the committed common object id for a scan.
func (s *Store) commonProps(ctx context.Context, id int64) ([]byte, error) {
	if b, ok := s.common.get(id); ok {
		return b, nil
	}
	var v string
	switch err := s.db.QueryRowContext(ctx, `SELECT props FROM common_props WHERE id = ?`, id).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("common properties %d are missing", id)
	case err != nil:
		return nil, fmt.Errorf("common properties %d: %w", id, err)
	}
	b := []byte(v)
	s.common.put(id, b, false)
	return b, nil
}
