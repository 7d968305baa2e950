package duckdb

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// The conformance suite against a real DuckDB file per test.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness{Open: openFixture})
}

type fixture struct{ src *Source }

func openFixture(t *testing.T) sourcetest.Fixture {
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	src, err := Open(context.Background(), map[string]string{"path": path, "read_only": "false"}, connectors.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return &fixture{src: src}
}

func (f *fixture) Source() connectors.Source          { return f.src }
func (f *fixture) Table(name string) connectors.Table { return connectors.Table{Name: "main." + name} }

var ddlType = map[sourcetest.Type]string{
	sourcetest.Int64: "BIGINT", sourcetest.Int32: "INTEGER", sourcetest.Float64: "DOUBLE",
	sourcetest.Bool: "BOOLEAN", sourcetest.String: "VARCHAR", sourcetest.Timestamp: "TIMESTAMP",
	sourcetest.TimestampTZ: "TIMESTAMPTZ", sourcetest.Date: "DATE", sourcetest.Decimal: "DECIMAL(12,2)",
	sourcetest.JSON: "JSON", sourcetest.Bytes: "BLOB", sourcetest.ListInt64: "BIGINT[]",
}

func (f *fixture) Create(t *testing.T, name string, cols []sourcetest.ColumnDef, rows [][]any) {
	t.Helper()
	var defs, marks []string
	var pk []string
	for i, c := range cols {
		d := connectors.QuoteIdent(c.Name) + " " + ddlType[c.Type]
		if c.NotNull {
			d += " NOT NULL"
		}
		if c.PrimaryKey {
			pk = append(pk, connectors.QuoteIdent(c.Name))
		}
		defs = append(defs, d)
		marks = append(marks, fmt.Sprintf("$%d::%s", i+1, ddlType[c.Type]))
	}
	if len(pk) > 0 {
		defs = append(defs, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
	}
	ctx := context.Background()
	if _, err := f.src.db.ExecContext(ctx, "CREATE TABLE "+name+" ("+strings.Join(defs, ", ")+")"); err != nil {
		t.Fatal(err)
	}
	tx, err := f.src.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, "INSERT INTO "+name+" VALUES ("+strings.Join(marks, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		args := make([]any, len(r))
		for i, v := range r {
			args[i] = bindable(v)
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			t.Fatalf("insert %v: %v", r, err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// bindable turns fixture values the driver cannot bind directly into text
// DuckDB casts back (lists as JSON, which casts to BIGINT[]).
func bindable(v any) any {
	switch x := v.(type) {
	case []int64:
		b, _ := json.Marshal(x)
		return string(b)
	case time.Time:
		return x.UTC()
	}
	return v
}

func (f *fixture) CreateSeries(t *testing.T, name string, n int64) {
	t.Helper()
	_, err := f.src.db.Exec(fmt.Sprintf(`CREATE TABLE %s AS
		SELECT i::BIGINT AS id, TIMESTAMP '2026-01-01 00:00:00' + to_seconds(i) AS ts,
		       'row-' || i AS name, i / 4.0 AS amount
		FROM range(%d) t(i)`, name, n))
	if err != nil {
		t.Fatal(err)
	}
}
