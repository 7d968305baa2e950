package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// The conformance suite against the real server, one database per test.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness{
		Open:       openFixture,
		StreamRows: 5_000_000,
		AfterCancel: func(t *testing.T, f sourcetest.Fixture) {
			if qs := f.(*fixture).db.activeQueries(t); len(qs) > 0 {
				t.Errorf("queries still running after a cancelled read: %q", qs)
			}
		},
	})
}

type fixture struct {
	db  *testDB
	src *Source
}

func openFixture(t *testing.T) sourcetest.Fixture {
	db := newDB(t)
	return &fixture{db: db, src: db.open(t)}
}

func (f *fixture) Source() connectors.Source { return f.src }
func (f *fixture) Table(name string) connectors.Table {
	return connectors.Table{Name: "public." + name}
}

var ddlType = map[sourcetest.Type]string{
	sourcetest.Int64: "bigint", sourcetest.Int32: "integer", sourcetest.Float64: "double precision",
	sourcetest.Bool: "boolean", sourcetest.String: "text", sourcetest.Timestamp: "timestamp",
	sourcetest.TimestampTZ: "timestamptz", sourcetest.Date: "date", sourcetest.Decimal: "numeric(12,2)",
	sourcetest.JSON: "jsonb", sourcetest.Bytes: "bytea", sourcetest.ListInt64: "bigint[]",
}

// Create inserts through pgx with each placeholder cast to the column
// type; pgx sends the fixtures' strings (dates, decimals, JSON) as text
// for the server to parse, and time.Time values are UTC already.
func (f *fixture) Create(t *testing.T, name string, cols []sourcetest.ColumnDef, rows [][]any) {
	t.Helper()
	var defs, pk []string
	for _, c := range cols {
		d := connectors.QuoteIdent(c.Name) + " " + ddlType[c.Type]
		if c.NotNull {
			d += " NOT NULL"
		}
		if c.PrimaryKey {
			pk = append(pk, connectors.QuoteIdent(c.Name))
		}
		defs = append(defs, d)
	}
	if len(pk) > 0 {
		defs = append(defs, "PRIMARY KEY ("+strings.Join(pk, ", ")+")")
	}
	f.db.exec(t, "CREATE TABLE "+name+" ("+strings.Join(defs, ", ")+")")
	// Multi-row INSERTs of up to 1000 rows: few round trips, few parameters.
	for start := 0; start < len(rows); start += 1000 {
		chunk := rows[start:min(start+1000, len(rows))]
		var tuples []string
		var args []any
		for _, r := range chunk {
			marks := make([]string, len(r))
			for i, v := range r {
				args = append(args, v)
				marks[i] = fmt.Sprintf("$%d::%s", len(args), ddlType[cols[i].Type])
			}
			tuples = append(tuples, "("+strings.Join(marks, ", ")+")")
		}
		f.db.exec(t, "INSERT INTO "+name+" VALUES "+strings.Join(tuples, ", "), args...)
	}
}

// CreateSeries builds the table inside the server. Unlogged, because a
// fixture needs no crash safety and millions of WAL records only slow
// the test.
func (f *fixture) CreateSeries(t *testing.T, name string, n int64) {
	t.Helper()
	f.db.exec(t, fmt.Sprintf(`CREATE UNLOGGED TABLE %s AS
		SELECT i AS id, TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL '1 second' AS ts,
		       'row-' || i AS name, i / 4.0::float8 AS amount
		FROM generate_series(0::bigint, %d) AS g(i)`, name, n-1))
	f.db.exec(t, "ALTER TABLE "+name+" ADD PRIMARY KEY (id), ALTER COLUMN ts SET NOT NULL")
	if _, err := f.db.conn.Exec(context.Background(), "ANALYZE "+name); err != nil {
		t.Fatal(err)
	}
}
