package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Scans read in pages with keyset pagination on (time_ms, seq): the index
// (project, time_ms, dedup_key) yields time order, and the rows of one
// time_ms are sorted by seq as they come (an incremental sort). Each page
// is one short query, so a scan holds no transaction or cursor open while
// fn runs (a slow export does not hold back vacuum) and stopping early
// costs at most one page. Pages start small, so short scans and early
// stops stay cheap, and grow (see defaultPages).
//
// Pages are separate snapshots: a row committed during the scan shows up
// only if it sorts after the rows already delivered, so order and
// uniqueness hold either way.

// ctxCheckRows bounds how many rows are delivered between ctx checks within
// a page already received.
const ctxCheckRows = 64

// ScanEvents implements store.Store.
func (s *Store) ScanEvents(ctx context.Context, q store.Scan, fn func(*store.Event) error) error {
	if err := s.enter("scan"); err != nil {
		return err
	}
	defer s.ops.Done()
	err := s.scanEvents(ctx, q, fn)
	var fe errFromFn
	switch {
	case errors.As(err, &fe):
		return fe.err // the caller's own error, untouched
	case err != nil:
		return fmt.Errorf("pgstore: scan: %w", err)
	}
	return nil
}

// errFromFn marks an error returned by the caller's fn.
type errFromFn struct{ err error }

func (e errFromFn) Error() string { return e.err.Error() }
func (e errFromFn) Unwrap() error { return e.err }

func (s *Store) scanEvents(ctx context.Context, q store.Scan, fn func(*store.Event) error) error {
	distinct, join := `e.distinct_id`, ``
	if q.Resolve {
		// Resolution happens in the same snapshot as the page's rows.
		distinct = `coalesce(i.canonical, e.distinct_id)`
		join = ` LEFT JOIN identity_ids i ON i.project = e.project AND i.id = e.distinct_id`
	}
	// The keyset starts at (FromMs, -1): seq values are positive, so the
	// first page is exactly time_ms >= FromMs.
	sql := `SELECT e.name, ` + distinct + `, e.time_ms, e.insert_id, e.props, e.ingest_ms, e.dedup_key, e.seq
		FROM events e` + join + `
		WHERE e.project = $1 AND e.time_ms < $2 AND (e.time_ms, e.seq) > ($3, $4)`
	args := []any{pgx.QueryResultFormats{pgx.BinaryFormatCode}, q.Project, q.ToMs, q.FromMs, int64(-1), 0}
	if len(q.Events) > 0 {
		sql += ` AND e.name = ANY($6::text[])`
		args = append(args, q.Events)
	}
	sql += ` ORDER BY e.time_ms, e.seq LIMIT $5`
	st := scanState{names: map[string]string{}}
	for size := s.pages.scanFirst; ; size = min(2*size, s.pages.scanMax) {
		n := size
		if q.Limit > 0 {
			n = min(n, q.Limit-st.n)
		}
		if n <= 0 {
			return nil
		}
		args[5] = n
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		got, err := st.drain(ctx, rows, fn)
		if err != nil || got < n {
			return err
		}
		args[3], args[4] = st.lastTime, st.lastSeq
	}
}

// scanState is the reused event of one scan and where it has got to.
type scanState struct {
	e                 store.Event
	lastTime, lastSeq int64
	n                 int               // rows delivered so far
	names             map[string]string // event names seen, to share their strings
}

// maxInterned bounds names; scans of many distinct names allocate as usual.
const maxInterned = 256

// drain delivers every row of rows to fn and closes rows. Values are read
// from the driver's buffer in binary form: Props points into it, and only
// the strings are copied.
func (st *scanState) drain(ctx context.Context, rows pgx.Rows, fn func(*store.Event) error) (got int, err error) {
	defer rows.Close()
	e := &st.e
	for rows.Next() {
		if st.n%ctxCheckRows == 0 {
			if err := ctx.Err(); err != nil {
				return got, err
			}
		}
		raw := rows.RawValues()
		if len(raw) != 8 || len(raw[2]) != 8 || len(raw[5]) != 8 || len(raw[7]) != 8 || (raw[6] != nil && len(raw[6]) != 16) {
			return got, fmt.Errorf("unexpected row layout from the events query")
		}
		e.Name = st.intern(raw[0])
		e.DistinctID = string(raw[1])
		e.TimeMs = int64(binary.BigEndian.Uint64(raw[2]))
		e.InsertID = string(raw[3]) // NULL reads as ""
		e.Props = raw[4]
		e.IngestMs = int64(binary.BigEndian.Uint64(raw[5]))
		e.Key = store.Key{}
		copy(e.Key[:], raw[6])
		st.lastTime, st.lastSeq = e.TimeMs, int64(binary.BigEndian.Uint64(raw[7]))
		st.n++
		got++
		if err := fn(e); err != nil {
			return got, errFromFn{err}
		}
	}
	if err := rows.Err(); err != nil {
		return got, err
	}
	return got, ctx.Err()
}

func (st *scanState) intern(b []byte) string {
	if s, ok := st.names[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(st.names) < maxInterned {
		st.names[s] = s
	}
	return s
}

// ScanMerges streams the merges of a project in arrival order. It exists for
// identity handling and the conformance suite; the Store interface has no
// reader for merges yet.
func (s *Store) ScanMerges(ctx context.Context, project int64, fn func(*store.Merge) error) error {
	if err := s.enter("scan merges"); err != nil {
		return err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT distinct_id_1, distinct_id_2, time_ms, ingest_ms, props
		FROM merges WHERE project = $1 ORDER BY seq`, project)
	if err != nil {
		return fmt.Errorf("pgstore: scan merges: %w", err)
	}
	defer rows.Close()
	var m store.Merge
	for rows.Next() {
		if err := rows.Scan(&m.DistinctIDs[0], &m.DistinctIDs[1], &m.TimeMs, &m.IngestMs, nil); err != nil {
			return fmt.Errorf("pgstore: scan merges: %w", err)
		}
		m.Props = rows.RawValues()[4]
		if err := fn(&m); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: scan merges: %w", err)
	}
	return nil
}
