package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
)

// scanWindowed reads what is left of a range after the last row st
// delivered, in time windows of about a page each (approximate quantiles
// of the rest's times, one pass over one column), each read by keyset
// pages (scanPager), so no query sorts more than a page of whole rows.
// Each page reads the range's columns again, so this is the slow way,
// taken when DuckDB cannot sort the range within its memory_limit. Each
// page is its own snapshot: rows committed meanwhile appear only if they
// sort after the last row delivered, so order and uniqueness hold.
func (s *Store) scanWindowed(ctx context.Context, q store.Scan, where string, args []any, st *scanState, fn func(*store.Event) error) error {
	args = args[:len(args):len(args)] // appends below never share the caller's array
	where += ` AND (time_ms > ? OR (time_ms = ? AND seq > ?))`
	bounds, err := s.scanWindows(ctx, where, append(args, st.lastTime, st.lastTime, st.lastSeq), s.scanPage)
	if err != nil {
		return err
	}
	p := scanPager{where: where + ` AND time_ms < ?`, st: st}
	pageRows := s.scanPage
	for _, end := range append(bounds, q.ToMs) {
		for {
			size := pageRows
			if q.Limit > 0 {
				size = min(size, q.Limit-st.n)
			}
			full, err := p.page(ctx, s.db, append(args, st.lastTime, st.lastTime, st.lastSeq, end), size, fn)
			if isOutOfMemory(err) && pageRows > minScanPage {
				// Even a page's sort can be too much for a small
				// memory_limit (16 MB, the least share, with wide rows):
				// smaller pages, from the last row delivered.
				pageRows = max(pageRows/4, minScanPage)
				continue
			}
			if err != nil || (q.Limit > 0 && st.n >= q.Limit) {
				return err
			}
			if !full {
				break // the window is done
			}
		}
	}
	return nil
}

// minScanPage is the least page a windowed scan shrinks to when a page
// runs out of memory.
const minScanPage = 256

// isOutOfMemory reports DuckDB's Out of Memory error, unless it came from
// the caller's fn: that error ends the scan whatever it wraps.
func isOutOfMemory(err error) bool {
	var fe errFromFn
	var de *duckdb.Error
	return err != nil && !errors.As(err, &fe) && errors.As(err, &de) && de.Type == duckdb.ErrorTypeOutOfMemory
}

// scanPager reads one scan's keyset pages.
type scanPager struct {
	where string // the range, after the last row, before the window's end
	st    *scanState
}

// page delivers the next size rows (or fewer: the window's rest) of the
// window and reports whether it delivered size rows. A top-N of whole rows
// holds far more than its N (the first page of a 2M-event range ran out of
// 64 MiB), so the page's last key comes from a top-N of the key columns
// alone, and the rows up to it are then read and sorted: at most size rows.
func (p *scanPager) page(ctx context.Context, db *sql.DB, args []any, size int, fn func(*store.Event) error) (bool, error) {
	var lastTime, lastSeq int64
	err := db.QueryRowContext(ctx, `SELECT time_ms, seq FROM events WHERE `+p.where+
		` ORDER BY time_ms, seq LIMIT 1 OFFSET ?`, append(args, size-1)...).Scan(&lastTime, &lastSeq)
	full := err == nil
	upTo := ``
	switch {
	case full:
		upTo = ` AND (time_ms < ? OR (time_ms = ? AND seq <= ?))`
		args = append(args, lastTime, lastTime, lastSeq)
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	// The LIMIT holds the page to size when a row committed since the
	// key query sorts before its last key.
	rows, err := db.QueryContext(ctx, `SELECT `+scanCols+` FROM events WHERE `+p.where+upTo+` ORDER BY time_ms, seq LIMIT ?`, append(args, size)...)
	if err != nil {
		return false, err
	}
	_, err = p.st.drain(ctx, rows, fn)
	return full, err
}

// maxScanWindows caps the windows of one scan, so the quantile list stays
// small; beyond it windows hold more than a page and take several pages.
const maxScanWindows = 4096

// scanWindows returns ascending time bounds that cut the rows matching
// where into windows of about page rows each (none when they fit one page).
func (s *Store) scanWindows(ctx context.Context, where string, args []any, page int) ([]int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+where, args...).Scan(&n); err != nil {
		return nil, err
	}
	k := min(int((n+int64(page)-1)/int64(page)), maxScanWindows)
	if k <= 1 {
		return nil, nil
	}
	var list strings.Builder
	for i := 1; i < k; i++ {
		if i > 1 {
			list.WriteString(", ")
		}
		fmt.Fprintf(&list, "%g", float64(i)/float64(k))
	}
	rows, err := s.db.QueryContext(ctx, `SELECT unnest(approx_quantile(time_ms, [`+list.String()+`])) FROM events WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// A bound is where a window ends (exclusive); equal quantiles (many
	// rows at one time) make one window, which its keyset pages walk.
	bounds := make([]int64, 0, k-1)
	for rows.Next() {
		var b int64
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		if len(bounds) == 0 || b > bounds[len(bounds)-1] {
			bounds = append(bounds, b)
		}
	}
	return bounds, rows.Err()
}
