package lookup

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonw"
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
// sent compressed) and returns the table or why it was refused.
func Parse(r io.Reader, opt Options) (*Table, error) {
	lr := &limitReader{r: r, max: opt.MaxBytes, maxRow: opt.MaxRowBytes}
	if lr.max <= 0 {
		lr.max = DefaultMaxBytes
	}
	if lr.maxRow <= 0 {
		lr.maxRow = DefaultMaxRowBytes
	}
	br := bufio.NewReader(lr)
	if bom, err := br.Peek(3); err == nil && bytes.Equal(bom, []byte("\uFEFF")) {
		br.Discard(3)
	}
	cr := csv.NewReader(br) // reuses br: no second buffer
	cr.FieldsPerRecord = -1 // a short or long row is a row error, checked below
	cr.ReuseRecord = true

	header, err := cr.Read()
	switch {
	case err == io.EOF:
		return nil, fmt.Errorf("%w: the file is empty; the first row must be a header", ErrInvalid)
	case errors.Is(err, errRowTooLarge):
		return nil, fmt.Errorf("%w: header: longer than %d bytes", ErrInvalid, lr.maxRow)
	case isRecordError(err):
		return nil, fmt.Errorf("%w: header: %w", ErrInvalid, err)
	case err != nil:
		return nil, fmt.Errorf("lookup: reading CSV: %w", err)
	}
	b, err := newBuilder(header)
	if err != nil {
		return nil, err
	}
	dataStart := lr.read - int64(br.Buffered())
	for row := 1; ; row++ {
		lr.recStart = lr.read - int64(br.Buffered())
		if row == reserveAfter+1 && opt.SizeHint > 0 {
			b.reserve(lr.recStart-dataStart, min(opt.SizeHint, lr.max)-dataStart)
		}
		rec, err := cr.Read()
		switch {
		case err == io.EOF:
			return b.finish()
		case errors.Is(err, errRowTooLarge):
			b.errs.add(row, b.line(cr, err), "invalid row: longer than %d bytes (is a quote left open?)", lr.maxRow)
			return nil, &b.errs // the CSV cannot be resynchronised after a cut
		case isRecordError(err):
			b.errs.add(row, b.line(cr, err), "invalid row: %v", err)
		case err != nil:
			return nil, fmt.Errorf("lookup: reading CSV: %w", err)
		default:
			line, _ := cr.FieldPos(0)
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
	names [][]byte       // `"column":` per column, encoded once
	seen  map[string]int // key → data row where it first appeared
	errs  RowErrors
	cells cellParser
}

func newBuilder(header []string) (*builder, error) {
	if len(header) < 2 {
		return nil, fmt.Errorf("%w: header: at least 2 columns are required (a key and one property), got %d", ErrInvalid, len(header))
	}
	b := &builder{seen: map[string]int{}}
	first := map[string]int{}
	for i, name := range header {
		switch j, dup := first[name]; {
		case !utf8.ValidString(name):
			return nil, fmt.Errorf("%w: header: column %d: name is not valid UTF-8", ErrInvalid, i+1)
		case strings.TrimSpace(name) == "":
			return nil, fmt.Errorf("%w: header: column %d: name is blank", ErrInvalid, i+1)
		case dup:
			return nil, fmt.Errorf("%w: header: column %d: name %q is already used by column %d", ErrInvalid, i+1, name, j+1)
		}
		first[name] = i
		name = strings.Clone(name) // header is the csv.Reader's reused record
		b.t.columns = append(b.t.columns, name)
		b.names = append(b.names, append(jsonw.String(nil, name), ':'))
	}
	return b, nil
}

// line finds where a failed record starts, for the error message.
func (b *builder) line(cr *csv.Reader, err error) int {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.StartLine
	}
	line, _ := cr.FieldPos(0)
	return line
}

func (b *builder) add(row, line int, rec []string) {
	if len(rec) != len(b.names) {
		b.errs.add(row, line, "invalid row: wrong number of fields: got %d, want %d", len(rec), len(b.names))
		return
	}
	key := rec[0]
	if strings.TrimSpace(key) == "" {
		b.errs.add(row, line, "primary key is required and cannot be blank")
		return
	}
	if strings.IndexByte(key, 0) >= 0 {
		b.errs.add(row, line, "%s", errNULKey)
		return
	}
	for i, cell := range rec {
		if !utf8.ValidString(cell) {
			b.errs.add(row, line, "column %q: value is not valid UTF-8", b.t.columns[i])
			return
		}
	}
	if first, dup := b.seen[key]; dup {
		b.errs.add(row, line, "duplicate primary key %q (first in row %d)", key, first)
		return
	}
	key = strings.Clone(key) // don't pin the csv.Reader's record string
	b.seen[key] = row
	if b.errs.Total > 0 {
		return
	}
	buf := append(b.t.buf, '{')
	buf = jsonw.String(append(buf, b.names[0]...), key)
	for i := 1; i < len(rec); i++ {
		if rec[i] == "" {
			continue // an empty cell is an absent property
		}
		buf = append(append(buf, ','), b.names[i]...)
		buf = b.cells.append(buf, rec[i])
	}
	b.t.buf = append(buf, '}')
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
