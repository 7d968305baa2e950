package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// Parquet and CSV files are read by path or glob through an in-memory
// DuckDB, with no database file at all, under the allowed paths.
func TestReadFilesByGlob(t *testing.T) {
	dir := t.TempDir()
	// The files are written by a DuckDB of the test's own: a source
	// cannot write files.
	gen, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	for i := 0; i < 2; i++ {
		_, err := gen.Exec(fmt.Sprintf(`COPY (SELECT %d * 10 + r AS id, 'e' || r AS event FROM range(10) t(r))
			TO '%s' (FORMAT parquet)`, i, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", i))))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "users.csv"), []byte("user_id,plan\nu1,pro\nu2,free\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Open(context.Background(), map[string]string{}, connectors.Options{AllowedPaths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct {
		table string
		rows  int
	}{{filepath.Join(dir, "*.parquet"), 20}, {filepath.Join(dir, "users.csv"), 2}} {
		s, err := w.Discover(context.Background(), connectors.Table{Name: tc.table})
		if err != nil || len(s.Columns) != 2 {
			t.Fatalf("discover %s: %v %+v", tc.table, err, s)
		}
		_, rows, err := sourcetest.Rows(context.Background(), w, connectors.ReadRequest{Table: connectors.Table{Name: tc.table}})
		if err != nil || len(rows) != tc.rows {
			t.Fatalf("read %s: %d rows, %v", tc.table, len(rows), err)
		}
	}
	_, err = w.Discover(context.Background(), connectors.Table{Name: filepath.Join(dir, "missing-*.parquet")})
	if err == nil || !connectors.IsPermanent(err) {
		t.Fatalf("missing files: %v, want a permanent error", err)
	}
}

// A source opens an existing file read-only unless told otherwise, so a
// sync can never change the warehouse.
func TestReadOnlyByDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.duckdb")
	rw, err := Open(context.Background(), map[string]string{"path": path, "read_only": "false"}, connectors.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.db.Exec("CREATE TABLE t AS SELECT 1 AS x"); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	ro, err := Open(context.Background(), map[string]string{"path": path}, connectors.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.db.Exec("INSERT INTO t VALUES (2)"); err == nil {
		t.Fatal("insert into a read-only source succeeded")
	}
	_, err = ro.Discover(context.Background(), connectors.Table{Query: "SELEC nonsense"})
	if err == nil || !connectors.IsPermanent(err) {
		t.Fatalf("bad SQL: %v, want a permanent error", err)
	}
	if err := Kind().Check(map[string]string{"read_only": "maybe"}); err == nil || !errors.As(err, new(*connectors.FieldError)) {
		t.Fatalf("read_only: maybe accepted: %v", err)
	}
}
