// Package duckdb is the embedded local warehouse source: a DuckDB database
// file (separate from the store's), which also reads Parquet and CSV files
// by path or glob. Rows leave DuckDB through its Arrow interface, one data
// chunk at a time, so nothing is converted row by row.
package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	duckdbdrv "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors"
)

// Kind is the `kind: duckdb` source.
func Kind() connectors.Kind {
	return connectors.Kind{
		Name: "duckdb",
		Doc:  "Embedded DuckDB warehouse file; tables may also name Parquet or CSV files by path or glob.",
		Fields: []connectors.Field{
			{Name: "path", Doc: "Database file. Empty: an in-memory database, for reading Parquet/CSV files only."},
			{Name: "read_only", Doc: "Open the file read-only (default true), so a sync never changes the warehouse."},
			{Name: "memory_limit", Doc: "DuckDB memory_limit for this source, e.g. 1GB (default 1GB)."},
			{Name: "threads", Doc: "DuckDB threads for this source (default 2)."},
		},
		Check: check,
		Open: func(ctx context.Context, f map[string]string) (connectors.Source, error) {
			return Open(ctx, f)
		},
	}
}

func check(f map[string]string) error {
	if v, ok := f["read_only"]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return &connectors.FieldError{Field: "source.read_only", Msg: fmt.Sprintf("%q is not a boolean", v)}
		}
	}
	if v, ok := f["threads"]; ok {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return &connectors.FieldError{Field: "source.threads", Msg: fmt.Sprintf("%q is not a positive integer", v)}
		}
	}
	return nil
}

// Source reads one DuckDB database.
type Source struct {
	db *sql.DB
}

// Open opens the database named by fields (see Kind).
func Open(ctx context.Context, fields map[string]string) (*Source, error) {
	if err := check(fields); err != nil {
		return nil, connectors.Permanent(err)
	}
	q := url.Values{}
	path := fields["path"]
	readOnly := path != ""
	if v, ok := fields["read_only"]; ok && path != "" {
		readOnly, _ = strconv.ParseBool(v)
	}
	if readOnly {
		q.Set("access_mode", "read_only")
	}
	q.Set("memory_limit", or(fields["memory_limit"], "1GB"))
	q.Set("threads", or(fields["threads"], "2"))
	db, err := sql.Open("duckdb", path+"?"+q.Encode())
	if err != nil {
		return nil, connectors.Permanent(fmt.Errorf("duckdb source %s: %w", path, err))
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, connectors.Permanent(fmt.Errorf("duckdb source %s: %w", path, err))
	}
	return &Source{db: db}, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Close closes the database.
func (s *Source) Close() error { return s.db.Close() }

var dialect = connectors.Dialect{Placeholder: connectors.DollarPlaceholder}

// from renders the FROM clause of t. A name that looks like a file path or
// glob becomes a string literal, which DuckDB reads as Parquet, CSV or JSON
// by its extension.
func from(t connectors.Table) string {
	if t.Query != "" {
		return "(" + t.Query + ") AS q"
	}
	if isPath(t.Name) {
		return "'" + strings.ReplaceAll(t.Name, "'", "''") + "'"
	}
	return connectors.QuoteTable(t.Name)
}

func isPath(name string) bool {
	if strings.ContainsAny(name, "/*?") {
		return true
	}
	lower := strings.ToLower(name)
	for _, ext := range []string{".parquet", ".csv", ".csv.gz", ".tsv", ".json", ".ndjson", ".jsonl"} {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}

// Read streams req's rows as DuckDB's Arrow record batches.
func (s *Source) Read(ctx context.Context, req connectors.ReadRequest, fn func(arrow.RecordBatch) error) error {
	if err := req.Validate(); err != nil {
		return err
	}
	query, args := connectors.SelectSQL(dialect, from(req.Table), req)
	return s.arrowQuery(ctx, query, args, func(rr recordReader) error {
		for rr.Next() {
			if err := fn(rr.RecordBatch()); err != nil {
				return err
			}
		}
		return rr.Err()
	})
}

type recordReader interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Schema() *arrow.Schema
	Err() error
}

// arrowQuery runs query on a dedicated connection and hands its Arrow
// reader to use; the connection goes back to the pool only afterwards.
func (s *Source) arrowQuery(ctx context.Context, query string, args []any, use func(recordReader) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("duckdb source: %w", err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		ar, err := duckdbdrv.NewArrowFromConn(dc.(driver.Conn))
		if err != nil {
			return err
		}
		rr, err := ar.QueryContext(ctx, query, args...)
		if err != nil {
			return classify(err)
		}
		defer rr.Release()
		return use(rr)
	})
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil && !errors.Is(err, ctxErr) {
		// DuckDB reports an interrupted query as its own error.
		return fmt.Errorf("duckdb source: %w (%v)", ctxErr, err)
	}
	return err
}

// classify marks catalog errors (a missing table or column) and binder
// errors permanent; anything else may be transient.
func classify(err error) error {
	var de *duckdbdrv.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdbdrv.ErrorTypeCatalog:
			return connectors.Permanent(fmt.Errorf("duckdb source: %w: %v", connectors.ErrNotFound, err))
		case duckdbdrv.ErrorTypeIO:
			if strings.Contains(de.Msg, "No files found") {
				return connectors.Permanent(fmt.Errorf("duckdb source: %w: %v", connectors.ErrNotFound, err))
			}
		case duckdbdrv.ErrorTypeBinder, duckdbdrv.ErrorTypeParser:
			return connectors.Permanent(fmt.Errorf("duckdb source: %w", err))
		}
	}
	return fmt.Errorf("duckdb source: %w", err)
}

// Count implements connectors.Counter: the rows req selects, for an ETA.
func (s *Source) Count(ctx context.Context, req connectors.ReadRequest) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	req.OrderBy = nil
	query, args := connectors.SelectSQL(dialect, from(req.Table), req)
	var n int64
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM ("+query+") AS c", args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("duckdb: count %s: %w", req.Table, err)
	}
	return n, nil
}
