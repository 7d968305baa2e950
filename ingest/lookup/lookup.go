// Package lookup parses lookup-table uploads (PUT /lookup-tables/{id}): an
// RFC 4180 CSV whose first column is a join key and whose other columns
// become properties of the rows that key names.
//
// Rules, after the public lookup-table documentation:
//   - The first record is the header: at least 2 columns, names non-blank,
//     unique (case-sensitive) and valid UTF-8. A UTF-8 byte-order mark is
//     skipped, since spreadsheet exports often start with one.
//   - Every data record has as many fields as the header. Its first field,
//     the key, is non-blank and unique in the file.
//   - Cells are typed: an empty cell leaves the property out; true/false
//     (any case) are booleans; a JSON number is a number, unless it is an
//     integer beyond ±2^53, which stays a string so that long ids keep
//     every digit; an RFC 3339 timestamp is kept as a string normalised to
//     UTC (time.RFC3339Nano), so that string order is time order and one
//     instant has one spelling; a JSON array of strings (["a","b"]) is a
//     list; anything else is a string. Leading zeros ("02134") make a
//     string, not a number: zip codes and ids survive.
//   - The key is stored as given, always a string: it is what event
//     property values are matched against.
//   - Every cell is valid UTF-8 (the import API has the same rule).
//
// An upload is read by a Stream, one bounded Batch at a time, which the
// store appends inside the replacement's transaction: memory does not grow
// with the table, and the first bad row ends the stream (the store rolls
// back). Parse builds a whole Table in memory instead, for small tables.
//
// Parsing is all or nothing: either a complete *Table, or an error. Bad
// rows are reported together in a *RowErrors (the first 10, with the total);
// header and framing problems wrap ErrInvalid; an upload over the size
// limit is ErrTooLarge (the API's 413). Any other error comes from the
// reader, e.g. a corrupt gzip stream.
package lookup

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultMaxBytes is the documented limit on an uncompressed table.
const DefaultMaxBytes = 100 << 20

// DefaultMaxRowBytes bounds one CSV record. It stops a stray quote, which
// makes the rest of the file one field, from buffering the whole body
// again inside encoding/csv.
const DefaultMaxRowBytes = 1 << 20

// MaxReportedErrors is how many bad rows an error lists, as the public API
// does; RowErrors.Total still counts them all.
const MaxReportedErrors = 10

var (
	// ErrTooLarge: the uncompressed upload exceeds Options.MaxBytes.
	ErrTooLarge = errors.New("lookup table is larger than the size limit")
	// ErrInvalid is matched (errors.Is) by every validation failure,
	// *RowErrors included, so the API can answer 400 for all of them.
	ErrInvalid = errors.New("invalid lookup table")
)

// Options tunes Parse; the zero value applies the defaults.
type Options struct {
	MaxBytes    int64 // uncompressed bytes; 0 means DefaultMaxBytes
	MaxRowBytes int64 // bytes of one record, give or take the 4 KiB read buffer; 0 means DefaultMaxRowBytes
	// SizeHint is the CSV's size in bytes when known (an uncompressed
	// body's Content-Length), 0 otherwise. With it the table's buffers
	// are sized once from the first rows instead of growing by copies,
	// which allocated about five times the final table.
	SizeHint int64
	// BatchRows bounds a Stream's batches; 0 means BatchRows. Tests
	// lower it to span several batches with a small table.
	BatchRows int
}

// RowError is one rejected data row.
type RowError struct {
	Row     int    // 1-based data row: the first record after the header is 1
	Line    int    // 1-based line of the CSV where the record starts
	Message string // e.g. "primary key is required and cannot be blank"
}

// RowErrors lists the first MaxReportedErrors bad rows in file order.
type RowErrors struct {
	Rows  []RowError
	Total int // bad rows in the whole file, at least len(Rows)
}

func (e *RowErrors) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lookup: %d row(s) failed validation", e.Total)
	for _, r := range e.Rows {
		fmt.Fprintf(&b, "; row %d (line %d): %s", r.Row, r.Line, r.Message)
	}
	if e.Total > len(e.Rows) {
		fmt.Fprintf(&b, "; and %d more", e.Total-len(e.Rows))
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true for row errors.
func (e *RowErrors) Unwrap() error { return ErrInvalid }

func (e *RowErrors) add(row, line int, format string, args ...any) {
	e.Total++
	if len(e.Rows) < MaxReportedErrors {
		e.Rows = append(e.Rows, RowError{Row: row, Line: line, Message: fmt.Sprintf(format, args...)})
	}
}

// Table is a parsed lookup table. Rows are stored as compact JSON objects
// in one buffer (one allocation for the data, not one per row) and found
// by key through a map. A Table is immutable and safe for concurrent use.
type Table struct {
	columns []string
	keys    []string
	index   map[string]int // key → 1-based data row = position + 1
	buf     []byte
	ends    []int // row i is buf[ends[i-1]:ends[i]], with ends[-1] = 0
}

// Columns returns the header; Columns()[0] is the key column.
func (t *Table) Columns() []string { return append([]string(nil), t.columns...) }

// Len is the number of rows.
func (t *Table) Len() int { return len(t.keys) }

// Key returns the key of row i (0 ≤ i < Len), in file order.
func (t *Table) Key(i int) string { return t.keys[i] }

// Row returns row i as a JSON object holding the key column (a string) and
// every non-empty cell, e.g. {"id":"a1","price":9.5,"tags":["x"]}. The
// bytes are shared: callers must not modify them.
func (t *Table) Row(i int) []byte {
	start := 0
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.buf[start:t.ends[i]:t.ends[i]]
}

// Lookup returns the row whose key is key.
func (t *Table) Lookup(key string) ([]byte, bool) {
	row, ok := t.index[key]
	if !ok {
		return nil, false
	}
	return t.Row(row - 1), true
}
