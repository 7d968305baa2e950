// Package duckdb is the embedded local warehouse source: a DuckDB database
// file (separate from the store's), which also reads Parquet and CSV files
// by path or glob. Rows leave DuckDB through its Arrow interface, one data
// chunk at a time, so nothing is converted row by row.
//
// A source is confined (see guard.go): once its database file is open,
// DuckDB may touch no other file except under the operator's
// allowed_paths, load no extension, attach nothing, and its configuration
// is locked; every statement is one SELECT, checked by DuckDB's own
// parser, run in a read-only transaction.
package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"github.com/tributary-dev/tributary/internal/duckarrow"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	duckdbdrv "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors"
)

// Kind is the `kind: duckdb` source with no allowed_paths: it reads its
// database file only.
func Kind() connectors.Kind { return KindWith(connectors.Options{}) }

// KindWith is the `kind: duckdb` source under the operator's limits.
func KindWith(opts connectors.Options) connectors.Kind {
	return connectors.Kind{
		Name: "duckdb",
		Doc:  "Embedded DuckDB warehouse file; tables may also name Parquet or CSV files by path or glob under the server's allowed_paths.",
		Fields: []connectors.Field{
			{Name: "path", Path: true, Doc: "Database file. Empty: an in-memory database, for reading Parquet/CSV files under the server's allowed_paths only."},
			{Name: "read_only", Doc: "Open the file read-only (default true), so other processes may open it too; reads are read-only either way."},
			{Name: "memory_limit", Doc: "DuckDB memory_limit for this source, e.g. 1GB (default 1GB)."},
			{Name: "threads", Doc: "DuckDB threads for this source (default 2)."},
		},
		Check: check,
		Open: func(ctx context.Context, f map[string]string) (connectors.Source, error) {
			return Open(ctx, f, opts)
		},
	}
}

func check(f map[string]string) error {
	if strings.Contains(f["path"], "?") {
		// It would end the file name and start DuckDB options of the user's.
		return &connectors.FieldError{Field: "source.path", Msg: "must not contain ?"}
	}
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
	db   *sql.DB
	opts connectors.Options // resolved
	tmp  string             // an in-memory source's own spill directory
}

// Open opens the database named by fields (see Kind) under opts' limits.
func Open(ctx context.Context, fields map[string]string, opts connectors.Options) (*Source, error) {
	if err := check(fields); err != nil {
		return nil, connectors.Permanent(err)
	}
	opts, err := opts.Resolved()
	if err != nil {
		return nil, connectors.Permanent(fmt.Errorf("duckdb source: %w", err))
	}
	path := fields["path"]
	if path == "" && len(opts.AllowedPaths) == 0 {
		return nil, connectors.Permanent(fmt.Errorf("%w: %w", &connectors.FieldError{Field: "source.path",
			Msg: "is required: an in-memory source reads files, and the server config declares no allowed_paths"}, connectors.ErrRefused))
	}
	if path != "" {
		real, err := connectors.ResolvePath(path)
		if err != nil {
			return nil, connectors.Permanent(&connectors.FieldError{Field: "source.path", Msg: err.Error()})
		}
		if opts.ServerPath(real) {
			return nil, connectors.Permanent(fmt.Errorf("%w: %w", &connectors.FieldError{Field: "source.path",
				Msg: fmt.Sprintf("%s is one of the server's own files", path)}, connectors.ErrRefused))
		}
		// The resolved name, so a link swapped after the check changes nothing.
		path = real
	}
	q := url.Values{}
	readOnly := path != ""
	if v, ok := fields["read_only"]; ok && path != "" {
		readOnly, _ = strconv.ParseBool(v)
	}
	if readOnly {
		q.Set("access_mode", "read_only")
	}
	q.Set("memory_limit", or(fields["memory_limit"], "1GB"))
	q.Set("threads", or(fields["threads"], "2"))
	tmp := ""
	if path == "" {
		// DuckDB would spill to ./.tmp, shared by every in-memory source
		// and readable by each (it allows its temp directory): one each.
		if tmp, err = os.MkdirTemp("", "tributary-duckdb-source-"); err != nil {
			return nil, fmt.Errorf("duckdb source: %w", err)
		}
		q.Set("temp_directory", tmp)
	}
	db, err := sql.Open("duckdb", path+"?"+q.Encode())
	if err != nil {
		os.RemoveAll(tmp)
		return nil, connectors.Permanent(fmt.Errorf("duckdb source %s: %w", fields["path"], err))
	}
	if err := confine(ctx, db, path, opts); err != nil {
		db.Close()
		os.RemoveAll(tmp)
		return nil, connectors.Permanent(fmt.Errorf("duckdb source %s: %w", fields["path"], err))
	}
	return &Source{db: db, opts: opts, tmp: tmp}, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Close closes the database.
func (s *Source) Close() error {
	err := s.db.Close()
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
	return err
}

var dialect = connectors.Dialect{Placeholder: connectors.DollarPlaceholder}

// from renders the FROM clause of t. A name that looks like a file path or
// glob becomes a string literal, which DuckDB reads as Parquet, CSV or JSON
// by its extension. The query's own line keeps a trailing -- comment from
// swallowing the closing parenthesis.
func from(t connectors.Table) string {
	if t.Query != "" {
		return "(" + t.Query + "\n) AS q"
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
	return s.run(ctx, req.Table, func(conn *sql.Conn) error {
		return arrowQuery(ctx, conn, query, args, func(rr recordReader) error {
			for rr.Next() {
				if err := fn(rr.RecordBatch()); err != nil {
					return err
				}
			}
			return rr.Err()
		})
	})
}

type recordReader interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Schema() *arrow.Schema
	Err() error
}

// arrowQuery runs query on conn, checked, and hands its Arrow reader to use.
func arrowQuery(ctx context.Context, conn *sql.Conn, query string, args []any, use func(recordReader) error) error {
	err := conn.Raw(func(dc any) error {
		if err := oneSelect(dc, query); err != nil {
			return err
		}
		ar, err := duckarrow.New(dc.(driver.Conn))
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

// queryRows runs query on conn, checked, as database/sql rows.
func queryRows(ctx context.Context, conn *sql.Conn, query string, args []any, use func(*sql.Rows) error) error {
	if err := conn.Raw(func(dc any) error { return oneSelect(dc, query) }); err != nil {
		return err
	}
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return classify(err)
	}
	defer rows.Close()
	if err := use(rows); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	return rows.Close()
}

// classify marks catalog errors (a missing table or column) and binder
// errors permanent, and what the confinement refuses as ErrRefused;
// anything else may be transient.
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
			if strings.Contains(de.Msg, "Expected a single SELECT statement") { // query('…') of a non-SELECT
				return fmt.Errorf("duckdb source: %w: %v", connectors.ErrRefused, err)
			}
			return connectors.Permanent(fmt.Errorf("duckdb source: %w", err))
		case duckdbdrv.ErrorTypePermission:
			return fmt.Errorf("duckdb source: %w: reads only its database and files under the server's allowed_paths: %v", connectors.ErrRefused, err)
		case duckdbdrv.ErrorTypeTransaction, duckdbdrv.ErrorTypeInvalidInput:
			if strings.Contains(de.Msg, "read-only") || strings.Contains(de.Msg, "configuration has been locked") {
				return fmt.Errorf("duckdb source: %w: reads only: %v", connectors.ErrRefused, err)
			}
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
	err := s.run(ctx, req.Table, func(conn *sql.Conn) error {
		return queryRows(ctx, conn, "SELECT count(*) FROM ("+query+") AS c", args, func(rows *sql.Rows) error {
			if !rows.Next() {
				return errors.New("count returned no row")
			}
			return rows.Scan(&n)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("duckdb: count %s: %w", req.Table, err)
	}
	return n, nil
}
