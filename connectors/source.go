package connectors

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// Source reads the tables of one warehouse connection.
type Source interface {
	// Discover describes a table or a query: its columns (Arrow type and
	// nullability from the catalog) and primary key, without reading rows.
	Discover(ctx context.Context, t Table) (*Schema, error)
	// Read streams the rows req selects to fn, one record batch at a time.
	// A batch is only valid during fn (Retain it to keep it). Read holds at
	// most a few batches in memory whatever the table size, and stops
	// promptly with ctx's error when ctx is cancelled.
	Read(ctx context.Context, req ReadRequest, fn func(arrow.RecordBatch) error) error
	Close() error
}

// Counter is implemented by sources that can count the rows a request
// selects cheaply enough to show progress with an ETA.
type Counter interface {
	Count(ctx context.Context, req ReadRequest) (int64, error)
}

// Table names what to read: a table (optionally schema-qualified, or for
// file-reading sources a path or glob) or a SQL query. Exactly one is set.
type Table struct {
	Name  string `yaml:"table,omitempty" json:"table,omitempty"`
	Query string `yaml:"query,omitempty" json:"query,omitempty"`
}

func (t Table) String() string {
	if t.Query != "" {
		return "query"
	}
	return t.Name
}

// Column is one column of a discovered schema.
type Column struct {
	Name string
	Type arrow.DataType
	// Nullable is false only when the catalog says NOT NULL (a full sync's
	// time column must be, spec §2.5); a query's columns are nullable.
	Nullable bool
	// SourceType is the warehouse's own type name, for reports and errors.
	SourceType string
}

// Schema is what Discover returns.
type Schema struct {
	Columns    []Column
	PrimaryKey []string
}

// Column returns the named column, or false.
func (s *Schema) Column(name string) (Column, bool) {
	for _, c := range s.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// ReadRequest selects rows.
type ReadRequest struct {
	Table Table
	// Columns to read; empty reads all.
	Columns []string
	// After, when set, keeps only rows strictly after the watermark in
	// (After.Columns...) order: the insert-time column, then the tie-breaking
	// key, so rows sharing an insert time are neither skipped nor repeated.
	After *Watermark
	// OrderBy sorts the stream (ascending). Incremental reads order by the
	// watermark columns so the last row of a batch is the new watermark.
	OrderBy []string
	// Limit caps the rows read (previews); 0 reads everything.
	Limit int64
}

// Watermark is an exclusive lower bound on (Columns...). Values hold Go
// values a driver can bind: time.Time, int64, float64, string.
type Watermark struct {
	Columns []string
	Values  []any
	// Inclusive makes the last column compare with >= instead of >: a
	// table without a unique tie-breaking key re-reads the rows that share
	// the last insert time (their deterministic $insert_id absorbs them),
	// because a strict bound could skip rows committed with that time.
	Inclusive bool
}

// Op is the comparison of column i of the watermark.
func (w *Watermark) Op(i int) string {
	if w.Inclusive && i == len(w.Columns)-1 {
		return ">="
	}
	return ">"
}

// Validate checks the request's shape before any SQL is built.
func (r ReadRequest) Validate() error {
	if (r.Table.Name == "") == (r.Table.Query == "") {
		return fmt.Errorf("%w: exactly one of table or query", ErrBadRequest)
	}
	if r.After != nil {
		if len(r.After.Columns) == 0 || len(r.After.Columns) != len(r.After.Values) {
			return fmt.Errorf("%w: watermark needs one value per column", ErrBadRequest)
		}
	}
	if r.Limit < 0 {
		return fmt.Errorf("%w: negative limit", ErrBadRequest)
	}
	return nil
}

var (
	// ErrBadRequest marks a ReadRequest a source cannot serve.
	ErrBadRequest = errors.New("bad read request")
	// ErrNotFound marks a missing table or column: a permanent error.
	ErrNotFound = errors.New("not found")
	// ErrRefused marks what a source will not do whoever asks: read a
	// file outside the operator's allowed_paths or one of the server's
	// own, run anything but one read-only SELECT. Permanent.
	ErrRefused = errors.New("refused")
)

// PermanentError wraps errors that retrying cannot fix (authentication,
// missing table, bad configuration), so a sync fails at once instead of
// backing off. Transient errors are returned unwrapped.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err (or what it wraps) is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrBadRequest) || errors.Is(err, ErrRefused)
}
