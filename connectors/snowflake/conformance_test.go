package snowflake

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// The conformance suite through the real gosnowflake driver against the
// local wire-protocol server, one server (and database) per test.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness{
		Open: openFixture,
		// Snowflake's ARRAY is semi-structured and read as JSON text;
		// structured ARRAY(NUMBER) columns are not mapped to lists.
		Unsupported: []sourcetest.Type{sourcetest.ListInt64},
	})
}

type fixture struct {
	srv *sfserver.Server
	src *Source
}

func openFixture(t *testing.T) sourcetest.Fixture {
	// Small chunks so every multi-chunk path runs even on small tables.
	srv := newServer(t, sfserver.Config{InlineRows: 500, ChunkRows: 20_000, TZOffsetMinutes: 330})
	return &fixture{srv: srv, src: openSource(t, srv)}
}

func (f *fixture) Source() connectors.Source { return f.src }

// Table names are upper case, as unquoted Snowflake names are stored.
func (f *fixture) Table(name string) connectors.Table {
	return connectors.Table{Name: "PUBLIC." + strings.ToUpper(name)}
}

var ddlType = map[sourcetest.Type]string{
	sourcetest.Int64: "NUMBER(38,0)", sourcetest.Int32: "INT", sourcetest.Float64: "FLOAT",
	sourcetest.Bool: "BOOLEAN", sourcetest.String: "VARCHAR", sourcetest.Timestamp: "TIMESTAMP_NTZ(9)",
	sourcetest.TimestampTZ: "TIMESTAMP_TZ(9)", sourcetest.Date: "DATE", sourcetest.Decimal: "NUMBER(12,2)",
	sourcetest.JSON: "VARIANT", sourcetest.Bytes: "BINARY",
}

// Column names are quoted lower case, as the suite expects them back.
func (f *fixture) Create(t *testing.T, name string, cols []sourcetest.ColumnDef, rows [][]any) {
	t.Helper()
	defs := make([]sfserver.Column, len(cols))
	for i, c := range cols {
		defs[i] = sfserver.Column{Name: c.Name, Type: ddlType[c.Type], NotNull: c.NotNull, PrimaryKey: c.PrimaryKey}
	}
	if err := f.srv.CreateTable(context.Background(), "PUBLIC."+strings.ToUpper(name), defs, rows); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) CreateSeries(t *testing.T, name string, n int64) {
	t.Helper()
	if err := createSeries(f.srv, name, n); err != nil {
		t.Fatal(err)
	}
}

func createSeries(srv *sfserver.Server, name string, n int64) error {
	cols := []sfserver.Column{
		{Name: "id", Type: "NUMBER(38,0)", NotNull: true, PrimaryKey: true},
		{Name: "ts", Type: "TIMESTAMP_NTZ(9)", NotNull: true},
		{Name: "name", Type: "VARCHAR"},
		{Name: "amount", Type: "FLOAT"},
	}
	return srv.CreateTableAs(context.Background(), "PUBLIC."+strings.ToUpper(name), cols, fmt.Sprintf(
		`SELECT i, TIMESTAMP '2026-01-01 00:00:00' + to_seconds(i), 'row-' || i, i / 4.0
		 FROM range(0, %d) AS g(i)`, n))
}
