package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/tributary-dev/tributary/ingest/store"
)

// ctxCheckRows bounds how many rows are delivered between ctx checks;
// database/sql notices cancellation only asynchronously.
const ctxCheckRows = 256

// maxScanPage is how many rows one query may hand over at once.
// duckdb-go only has materialized results, and DuckDB keeps a materialized
// result outside its memory_limit (measured: 2.7 GB RSS for a 6M-event
// range with memory_limit=256MB), so no single query may return an
// unbounded number of rows.
const maxScanPage = 20_480

// scanCols is the column list of every scan query and of the temp table.
const scanCols = `name, distinct_id, time_ms, coalesce(insert_id, '') AS insert_id, props, ingest_ms,
	coalesce(k_hi, 0) AS k_hi, coalesce(k_lo, 0) AS k_lo, seq, coalesce(common, 0) AS common`

// ScanEvents streams matching events; see store.Store. Rows go from the
// driver to fn one at a time, with Props in a reused buffer. A range is
// sorted by DuckDB (scanSorted) unless that runs out of memory; then the
// rest is read in windows of about a page (scanWindowed).
func (s *Store) ScanEvents(ctx context.Context, q store.Scan, fn func(*store.Event) error) error {
	if err := s.enter("scan"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.Sync(ctx); err != nil {
		return fmt.Errorf("duckstore: scan: waiting for acknowledged writes: %w", err)
	}
	if q.Resolve {
		pg, inner := s.graphs.get(q.Project), fn
		fn = func(e *store.Event) error {
			e.DistinctID = pg.resolve(e.DistinctID)
			return inner(e)
		}
	}
	err := s.scanEvents(ctx, q, fn)
	var fe errFromFn
	switch {
	case errors.As(err, &fe):
		return fe.err // the caller's own error, untouched
	case err != nil:
		return fmt.Errorf("duckstore: scan: %w", err)
	}
	return nil
}

// errFromFn marks an error returned by the caller's fn.
type errFromFn struct{ err error }

func (e errFromFn) Error() string { return e.err.Error() }
func (e errFromFn) Unwrap() error { return e.err }

func (s *Store) scanEvents(ctx context.Context, q store.Scan, fn func(*store.Event) error) error {
	var where strings.Builder
	where.WriteString(`project = ? AND time_ms >= ? AND time_ms < ?`)
	args := make([]any, 0, 8+len(q.Events))
	args = append(args, q.Project, q.FromMs, q.ToMs)
	if len(q.Events) > 0 {
		where.WriteString(` AND name IN (?` + strings.Repeat(`, ?`, len(q.Events)-1) + `)`)
		for _, name := range q.Events {
			args = append(args, name)
		}
	}
	st := scanState{common: s.commonProps, lastTime: math.MinInt64, lastSeq: math.MinInt64}
	if s.windowedScans {
		return s.scanWindowed(ctx, q, where.String(), args, &st, fn)
	}
	err := s.scanSorted(ctx, q, where.String(), args, &st, fn)
	if isOutOfMemory(err) {
		// Sorting whole rows needs more than DuckDB's memory_limit allows
		// (a 2M-event day failed at the 64 MiB a 512MB budget gives it):
		// go on, from the last row delivered, with pages that each sort at
		// most a page of rows. Slower: each page reads the range again.
		s.log.Warn("duckstore: scan: the range is too large to sort within memory_limit; reading it in windows (slower): raise memory_limit for faster exports",
			"project", q.Project, "delivered", st.n, "err", err)
		return s.scanWindowed(ctx, q, where.String(), args, &st, fn)
	}
	return err
}

// scanSorted is the fast way through a range: its first page is one plain
// query, so small scans cost one query; the rest is sorted by DuckDB into a
// temp table (spillable, bounded by memory_limit) on a dedicated connection
// and read back page by page in rowid order. The rest reflects a snapshot
// taken after the first page: rows committed in between appear only if
// they sort after the first page, so order and uniqueness hold either way.
func (s *Store) scanSorted(ctx context.Context, q store.Scan, where string, args []any, st *scanState, fn func(*store.Event) error) error {
	page := s.scanPage
	first := page
	if q.Limit > 0 && q.Limit < first {
		first = q.Limit
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+scanCols+` FROM events WHERE `+where+
		` ORDER BY time_ms, seq LIMIT ?`, append(args, first)...)
	if err != nil {
		return err
	}
	got, err := st.drain(ctx, rows, fn)
	if err != nil || got < first || st.n == q.Limit {
		return err
	}

	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rest := `CREATE OR REPLACE TEMP TABLE scan_rest AS SELECT ` + scanCols + ` FROM events WHERE ` + where +
		` AND (time_ms > ? OR (time_ms = ? AND seq > ?)) ORDER BY time_ms, seq`
	args = append(args, st.lastTime, st.lastTime, st.lastSeq)
	if q.Limit > 0 {
		rest += ` LIMIT ?`
		args = append(args, q.Limit-st.n)
	}
	if _, err := conn.ExecContext(ctx, rest, args...); err != nil {
		return err
	}
	// Dropped even if ctx is done: the connection goes back to the pool.
	defer conn.ExecContext(context.Background(), `DROP TABLE IF EXISTS scan_rest`)
	// Pages double from the first page's size up to maxScanPage, which only
	// matters when tests start them small.
	for from, size := 0, page; ; from += size {
		size = min(2*size, maxScanPage)
		rows, err := conn.QueryContext(ctx, `SELECT * FROM scan_rest WHERE rowid >= ? AND rowid < ? ORDER BY rowid`, from, from+size)
		if err != nil {
			return err
		}
		if got, err := st.drain(ctx, rows, fn); err != nil || got < size {
			return err
		}
	}
}

// scanState is the reused row buffer of one scan and where it has got to.
type scanState struct {
	e                 store.Event
	props             sql.RawBytes
	hi, lo, commonID  int64
	lastTime, lastSeq int64
	n                 int // rows delivered so far
	common            func(context.Context, int64) ([]byte, error)
	spliced           []byte // props with their common properties
	// The last common object read: a sync's events all name one.
	lastCommonID int64
	lastCommon   []byte
}

// drain delivers every row of rows to fn and closes rows. An error from fn
// is returned as is, so callers can recognise their own errors.
func (st *scanState) drain(ctx context.Context, rows *sql.Rows, fn func(*store.Event) error) (got int, err error) {
	defer rows.Close()
	e := &st.e
	for rows.Next() {
		if st.n%ctxCheckRows == 0 {
			if err := ctx.Err(); err != nil {
				return got, err
			}
		}
		// Strings scan without a copy (the driver already made them).
		// seq goes to st.lastSeq only with the row's time, once the row
		// reaches fn: a scan resumed after an error (scanWindowed) starts
		// after the last row delivered, never after one half read.
		var seq int64
		if err := rows.Scan(&e.Name, &e.DistinctID, &e.TimeMs, &e.InsertID, &st.props, &e.IngestMs, &st.hi, &st.lo, &seq, &st.commonID); err != nil {
			return got, err
		}
		e.Props = st.props
		if st.commonID != 0 {
			if st.commonID != st.lastCommonID {
				common, err := st.common(ctx, st.commonID)
				if err != nil {
					return got, err
				}
				st.lastCommonID, st.lastCommon = st.commonID, common
			}
			st.spliced = store.SpliceProps(st.spliced[:0], st.props, st.lastCommon)
			e.Props = st.spliced
		}
		e.Key = store.Key{}
		if e.InsertID != "" {
			e.Key = joinKey(st.hi, st.lo)
		}
		st.lastTime, st.lastSeq = e.TimeMs, seq
		st.n++
		got++
		if err := fn(e); err != nil {
			return got, errFromFn{err}
		}
	}
	if err := rows.Err(); err != nil {
		return got, err
	}
	// database/sql may end the loop early on cancellation without an error.
	return got, ctx.Err()
}

// ScanMerges streams the merges of a project in arrival order. It exists for
// identity handling and the conformance suite; the Store interface has no
// reader for merges yet.
func (s *Store) ScanMerges(ctx context.Context, project int64, fn func(*store.Merge) error) error {
	if err := s.enter("scan merges"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.Sync(ctx); err != nil {
		return fmt.Errorf("duckstore: scan merges: %w", err)
	}
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
