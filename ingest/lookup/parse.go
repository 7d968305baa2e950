package lookup

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// errRowTooLarge is internal: Parse turns it into a row error.
var errRowTooLarge = errors.New("row too large")

// limitReader enforces both size limits while the CSV streams through, so
// an oversized upload is refused after reading just past the limit rather
// than after buffering it.
type limitReader struct {
	r        io.Reader
	read     int64 // bytes delivered so far
	max      int64
	recStart int64 // offset where the record being read starts
	maxRow   int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.read > l.max {
		return 0, ErrTooLarge
	}
	// read-recStart over-counts by the bufio read-ahead (4 KiB at most),
	// which is negligible next to the row limit.
	if l.read-l.recStart > l.maxRow {
		return 0, errRowTooLarge
	}
	if room := l.max - l.read + 1; int64(len(p)) > room {
		p = p[:room] // one byte past the limit is enough to know
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	if l.read > l.max {
		return 0, ErrTooLarge
	}
	return n, err
}

// Parse reads a whole lookup-table CSV from r (already gunzipped if it was
// sent compressed) and returns the table or why it was refused. It holds
// the table whole; an upload is stored through a Stream instead.
func Parse(r io.Reader, opt Options) (*Table, error) {
	c, header, err := newCSVReader(r, opt)
	if err != nil {
		return nil, err
	}
	codec, err := newRowCodec(header)
	if err != nil {
		return nil, err
	}
	b := &builder{codec: codec, seen: map[string]int{}}
	b.t.columns = codec.columns
	dataStart := c.offset()
	for row := 1; ; row++ {
		c.startRecord()
		if row == reserveAfter+1 && opt.SizeHint > 0 {
			b.reserve(c.lr.recStart-dataStart, min(opt.SizeHint, c.lr.max)-dataStart)
		}
		rec, err := c.cr.Read()
		switch {
		case err == io.EOF:
			return b.finish()
		case errors.Is(err, errRowTooLarge):
			b.errs.add(row, recordLine(c.cr, err), "invalid row: longer than %d bytes (is a quote left open?)", c.lr.maxRow)
			return nil, &b.errs // the CSV cannot be resynchronised after a cut
		case isRecordError(err):
			b.errs.add(row, recordLine(c.cr, err), "invalid row: %v", err)
		case errors.Is(err, ErrTooLarge):
			return nil, ErrTooLarge
		case err != nil:
			return nil, fmt.Errorf("lookup: reading CSV: %w", err)
		default:
			line, _ := c.cr.FieldPos(0)
			b.add(row, line, rec)
		}
	}
}

// isRecordError reports CSV syntax errors confined to one record, after
// which encoding/csv carries on with the next line.
func isRecordError(err error) bool {
	var pe *csv.ParseError
	return errors.As(err, &pe) && (pe.Err == csv.ErrQuote || pe.Err == csv.ErrBareQuote || pe.Err == csv.ErrFieldCount)
}

// builder accumulates the table; once a row has failed it keeps only what
// validation needs (keys, for duplicates), since the table is discarded.
type builder struct {
	t     Table
	codec rowCodec
	seen  map[string]int // key → data row where it first appeared
	errs  RowErrors
}

func (b *builder) add(row, line int, rec []string) {
	if msg := b.codec.check(rec); msg != "" {
		b.errs.add(row, line, "%s", msg)
		return
	}
	key := rec[0]
	if first, dup := b.seen[key]; dup {
		b.errs.add(row, line, "duplicate primary key %q (first in row %d)", key, first)
		return
	}
	key = strings.Clone(key) // don't pin the csv.Reader's record string
	b.seen[key] = row
	if b.errs.Total > 0 {
		return
	}
	b.t.buf = b.codec.encode(b.t.buf, key, rec)
	b.t.ends = append(b.t.ends, len(b.t.buf))
	b.t.keys = append(b.t.keys, key)
}

// reserveAfter is how many rows Parse reads before it sizes the table
// from them and the upload's size (builder.reserve).
const reserveAfter = 1000

// reserve sizes the table's buffers for the whole upload, extrapolating
// from the rows built out of the first read bytes of CSV to total bytes
// of it. Growing by append instead copies a large buffer at each step
// (1.25× for large slices): about five times the final size allocated,
// the old and the new copy both live at the end. A 3 % margin absorbs
// rows a little longer than the first ones; a shortfall costs one more
// growth, as before. The buffer is capped at four times the CSV's size.
func (b *builder) reserve(read, total int64) {
	if b.errs.Total > 0 || read <= 0 || total <= read || len(b.t.keys) == 0 {
		return
	}
	scale := func(n int) int { return int(float64(n) * float64(total) / float64(read) * 1.03) }
	bufN := min(scale(len(b.t.buf)), int(4*total))
	rows := scale(len(b.t.keys))
	b.t.buf = slices.Grow(b.t.buf, bufN-len(b.t.buf))
	b.t.ends = slices.Grow(b.t.ends, rows-len(b.t.ends))
	b.t.keys = slices.Grow(b.t.keys, rows-len(b.t.keys))
	seen := make(map[string]int, rows)
	maps.Copy(seen, b.seen)
	b.seen = seen
}

func (b *builder) finish() (*Table, error) {
	if b.errs.Total > 0 {
		return nil, &b.errs
	}
	// With no bad rows every row was stored in order, so the data row
	// numbers kept for error messages are positions + 1.
	b.t.index = b.seen
	// buf keeps append's spare capacity (a quarter at most at this size):
	// trimming it would mean a second copy of the whole table.
	return &b.t, nil
}
