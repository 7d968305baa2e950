package lookup

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

// BatchRows and BatchBytes bound one Batch: a Stream holds one batch at a
// time, so they bound an upload's memory whatever its size.
const (
	BatchRows  = 16384
	BatchBytes = 8 << 20 // of rows as JSON; a batch ends after the row that crosses it
)

// Batch is up to BatchRows consecutive rows of a table, each checked
// (duplicate keys within the batch included). Only a store sees every
// earlier batch, so it checks keys repeated from one (see Duplicate).
type Batch struct {
	keys  []string
	rows  [][]byte
	nums  []int // 1-based data row of each row
	lines []int // CSV line where each row starts; 0 when not from a CSV
	buf   []byte
	ends  []int // row i of a Stream's batch is buf[ends[i-1]:ends[i]]
}

// Len is the number of rows in the batch.
func (b *Batch) Len() int { return len(b.keys) }

// Key returns the key of row i.
func (b *Batch) Key(i int) string { return b.keys[i] }

// Keys returns the batch's keys; callers must not modify them.
func (b *Batch) Keys() []string { return b.keys }

// Row returns row i as a compact JSON object (see Table.Row); the bytes
// are valid until the batch is reused.
func (b *Batch) Row(i int) []byte { return b.rows[i] }

// Duplicate builds the error refusing the first row of the batch whose key
// is in stored (keys a store already holds from earlier batches of the
// same upload), or nil if none is.
func (b *Batch) Duplicate(stored []string) error {
	if len(stored) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(stored))
	for _, k := range stored {
		set[k] = struct{}{}
	}
	for i, k := range b.keys {
		if _, dup := set[k]; dup {
			errs := &RowErrors{}
			errs.add(b.nums[i], b.lines[i], "duplicate primary key %q (first in an earlier row)", k)
			return errs
		}
	}
	return nil
}

// DuplicateKey builds the error refusing data row row, whose key repeats
// that of row first, for a store that finds repeated keys once every row
// is in (its line in the CSV is not known then).
func DuplicateKey(key string, row, first int) error {
	errs := &RowErrors{}
	errs.add(row, 0, "duplicate primary key %q (first in row %d)", key, first)
	return errs
}

func (b *Batch) reset() {
	b.keys, b.rows, b.nums, b.lines, b.buf, b.ends = b.keys[:0], b.rows[:0], b.nums[:0], b.lines[:0], b.buf[:0], b.ends[:0]
}

// Stream reads a lookup-table CSV one Batch at a time, for a store to
// append inside the replacement's transaction: memory stays one batch
// however large the upload. It stops at the first bad row; the store then
// rolls the replacement back, so the previous table stays whole.
type Stream struct {
	c     *csvReader
	codec rowCodec
	row   int            // data rows read
	seen  map[string]int // key → data row, within the current batch
	batch Batch
	max   int // rows per batch
	err   error
}

// NewStream reads the header of the CSV in r (already gunzipped); header
// and framing problems wrap ErrInvalid, as with Parse.
func NewStream(r io.Reader, opt Options) (*Stream, error) {
	c, header, err := newCSVReader(r, opt)
	if err != nil {
		return nil, err
	}
	codec, err := newRowCodec(header)
	if err != nil {
		return nil, err
	}
	if opt.BatchRows <= 0 {
		opt.BatchRows = BatchRows
	}
	return &Stream{c: c, codec: codec, seen: map[string]int{}, max: opt.BatchRows}, nil
}

// Columns returns the header; Columns()[0] is the key column.
func (s *Stream) Columns() []string { return append([]string(nil), s.codec.columns...) }

// Rows is the number of data rows read so far.
func (s *Stream) Rows() int { return s.row }

// Err is the error that ended the stream early: nil at a clean end or
// before one. A replacement that failed with Err() == nil failed in the
// store.
func (s *Stream) Err() error { return s.err }

// Next returns the next batch, valid until the following call, or io.EOF
// after the last one. A bad row ends the stream with a *RowErrors naming
// it; an oversized upload with ErrTooLarge; other errors come from the
// reader.
func (s *Stream) Next() (*Batch, error) {
	if s.err != nil {
		return nil, s.err
	}
	b := &s.batch
	b.reset()
	clear(s.seen)
	for b.Len() < s.max && len(b.buf) < BatchBytes {
		s.c.startRecord()
		rec, err := s.c.cr.Read()
		row := s.row + 1
		switch {
		case err == io.EOF:
			if b.Len() > 0 {
				return b.seal(), nil
			}
			return nil, io.EOF
		case errors.Is(err, errRowTooLarge):
			return nil, s.fail(row, recordLine(s.c.cr, err), fmt.Sprintf("invalid row: longer than %d bytes (is a quote left open?)", s.c.lr.maxRow))
		case isRecordError(err):
			return nil, s.fail(row, recordLine(s.c.cr, err), fmt.Sprintf("invalid row: %v", err))
		case err != nil:
			s.err = fmt.Errorf("lookup: reading CSV: %w", err)
			if errors.Is(err, ErrTooLarge) {
				s.err = ErrTooLarge
			}
			return nil, s.err
		}
		line, _ := s.c.cr.FieldPos(0)
		if msg := s.codec.check(rec); msg != "" {
			return nil, s.fail(row, line, msg)
		}
		if first, dup := s.seen[rec[0]]; dup {
			return nil, s.fail(row, line, fmt.Sprintf("duplicate primary key %q (first in row %d)", rec[0], first))
		}
		s.row = row
		key := strings.Clone(rec[0])
		s.seen[key] = row
		b.buf = s.codec.encode(b.buf, key, rec)
		b.keys = append(b.keys, key)
		b.nums = append(b.nums, row)
		b.lines = append(b.lines, line)
		b.ends = append(b.ends, len(b.buf))
	}
	return b.seal(), nil
}

// seal points the rows into buf once it has stopped growing (and moving).
func (b *Batch) seal() *Batch {
	start := 0
	for _, end := range b.ends {
		b.rows = append(b.rows, b.buf[start:end:end])
		start = end
	}
	return b
}

func (s *Stream) fail(row, line int, msg string) error {
	errs := &RowErrors{}
	errs.add(row, line, "%s", msg)
	s.err = errs
	return errs
}

// csvReader is the framing Parse and Stream share: size limits, BOM, and
// an encoding/csv reader that reuses its record.
type csvReader struct {
	lr *limitReader
	br *bufio.Reader
	cr *csv.Reader
}

// newCSVReader opens r and reads the header record.
func newCSVReader(r io.Reader, opt Options) (*csvReader, []string, error) {
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
		return nil, nil, fmt.Errorf("%w: the file is empty; the first row must be a header", ErrInvalid)
	case errors.Is(err, errRowTooLarge):
		return nil, nil, fmt.Errorf("%w: header: longer than %d bytes", ErrInvalid, lr.maxRow)
	case errors.Is(err, ErrTooLarge):
		return nil, nil, ErrTooLarge
	case isRecordError(err):
		return nil, nil, fmt.Errorf("%w: header: %w", ErrInvalid, err)
	case err != nil:
		return nil, nil, fmt.Errorf("lookup: reading CSV: %w", err)
	}
	return &csvReader{lr: lr, br: br, cr: cr}, header, nil
}

// startRecord marks where the next record starts, for the row limit.
func (c *csvReader) startRecord() { c.lr.recStart = c.offset() }

// offset is how many bytes of CSV the records read so far took.
func (c *csvReader) offset() int64 { return c.lr.read - int64(c.br.Buffered()) }

// recordLine finds where a failed record starts, for the error message.
func recordLine(cr *csv.Reader, err error) int {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.StartLine
	}
	line, _ := cr.FieldPos(0)
	return line
}

// rowCodec checks data records against the header and encodes them as
// JSON rows; Parse and Stream share it.
type rowCodec struct {
	columns []string
	names   [][]byte // `"column":` per column, encoded once
	cells   cellParser
}

func newRowCodec(header []string) (rowCodec, error) {
	var c rowCodec
	if len(header) < 2 {
		return c, fmt.Errorf("%w: header: at least 2 columns are required (a key and one property), got %d", ErrInvalid, len(header))
	}
	first := map[string]int{}
	for i, name := range header {
		switch j, dup := first[name]; {
		case !utf8.ValidString(name):
			return c, fmt.Errorf("%w: header: column %d: name is not valid UTF-8", ErrInvalid, i+1)
		case strings.TrimSpace(name) == "":
			return c, fmt.Errorf("%w: header: column %d: name is blank", ErrInvalid, i+1)
		case dup:
			return c, fmt.Errorf("%w: header: column %d: name %q is already used by column %d", ErrInvalid, i+1, name, j+1)
		}
		first[name] = i
		name = strings.Clone(name) // header is the csv.Reader's reused record
		c.columns = append(c.columns, name)
		c.names = append(c.names, append(jsonw.String(nil, name), ':'))
	}
	return c, nil
}

// check says why rec is refused, or "" (duplicates are the caller's).
func (c *rowCodec) check(rec []string) string {
	if len(rec) != len(c.names) {
		return fmt.Sprintf("invalid row: wrong number of fields: got %d, want %d", len(rec), len(c.names))
	}
	key := rec[0]
	if strings.TrimSpace(key) == "" {
		return "primary key is required and cannot be blank"
	}
	if strings.IndexByte(key, 0) >= 0 {
		return errNULKey
	}
	for i, cell := range rec {
		if !utf8.ValidString(cell) {
			return fmt.Sprintf("column %q: value is not valid UTF-8", c.columns[i])
		}
	}
	return ""
}

// encode appends rec as a JSON object, the key column as a string.
func (c *rowCodec) encode(buf []byte, key string, rec []string) []byte {
	buf = append(buf, '{')
	buf = jsonw.String(append(buf, c.names[0]...), key)
	for i := 1; i < len(rec); i++ {
		if rec[i] == "" {
			continue // an empty cell is an absent property
		}
		buf = append(append(buf, ','), c.names[i]...)
		buf = c.cells.append(buf, rec[i])
	}
	return append(buf, '}')
}

// Batches reads t one Batch at a time, so that a table built in memory (a
// warehouse import's) is stored as an upload is.
func (t *Table) Batches() *TableBatches { return &TableBatches{t: t} }

// TableBatches yields a Table's rows in batches; see Table.Batches.
type TableBatches struct {
	t     *Table
	next  int
	batch Batch
}

// Columns returns the table's header.
func (tb *TableBatches) Columns() []string { return tb.t.Columns() }

// Next returns the next batch, or io.EOF after the last.
func (tb *TableBatches) Next() (*Batch, error) {
	if tb.next >= tb.t.Len() {
		return nil, io.EOF
	}
	b := &tb.batch
	b.reset()
	for ; tb.next < tb.t.Len() && b.Len() < BatchRows; tb.next++ {
		b.keys = append(b.keys, tb.t.Key(tb.next))
		b.rows = append(b.rows, tb.t.Row(tb.next))
		b.nums = append(b.nums, tb.next+1)
		b.lines = append(b.lines, 0)
	}
	return b, nil
}
