package bigquery

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/bigquery/bqread"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// The conformance suite through the real client libraries: REST (schemas,
// query jobs) against the emulator, Storage Read against bqread. A
// fixture table is written once, to the emulator; the Storage Read server
// copies it (and every query result table) from there on first use, so
// both APIs serve the same rows. Generated series are the exception (see
// CreateSeries).
func TestConformance(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness{
		Open: openFixture,
		// BigQuery has no NULL arrays (a NULL ARRAY is stored and read as
		// []), so the matrix's NULL list cannot round-trip; ARRAY columns are
		// covered by TestTypes instead.
		Unsupported: []sourcetest.Type{sourcetest.ListInt64},
		StreamRows:  3_000_000,
	})
}

type fixture struct {
	*env
	src *Source
}

func openFixture(t *testing.T) sourcetest.Fixture {
	e := newEnv(t)
	return &fixture{env: e, src: e.open(t, nil)}
}

func (f *fixture) Source() connectors.Source { return f.src }
func (f *fixture) Table(name string) connectors.Table {
	return connectors.Table{Name: f.dataset + "." + name}
}

// float64Type is how fixtures declare FLOAT64 columns: the emulator
// takes the client library's legacy name FLOAT for ZetaSQL's 32-bit FLOAT.
const float64Type bq.FieldType = "FLOAT64"

var fieldType = map[sourcetest.Type]bq.FieldType{
	sourcetest.Int64: bq.IntegerFieldType, sourcetest.Int32: bq.IntegerFieldType, sourcetest.Float64: float64Type,
	sourcetest.Bool: bq.BooleanFieldType, sourcetest.String: bq.StringFieldType, sourcetest.Timestamp: bq.DateTimeFieldType,
	sourcetest.TimestampTZ: bq.TimestampFieldType, sourcetest.Date: bq.DateFieldType, sourcetest.Decimal: bq.NumericFieldType,
	sourcetest.JSON: bq.JSONFieldType, sourcetest.Bytes: bq.BytesFieldType,
}

// createTable makes an empty table in the emulator, with the primary key
// as BigQuery's (unenforced) PRIMARY KEY constraint.
func (e *env) createTable(t testing.TB, name string, schema bq.Schema, pk []string) {
	t.Helper()
	md := &bq.TableMetadata{Schema: schema}
	if len(pk) > 0 {
		md.TableConstraints = &bq.TableConstraints{PrimaryKey: &bq.PrimaryKey{Columns: pk}}
	}
	if err := e.emu.client.Dataset(e.dataset).Table(name).Create(context.Background(), md); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// insert adds rows to an emulator table with DML INSERTs of GoogleSQL
// literals, 1000 rows a statement. Not the streaming insertAll API: the
// emulator stores its BYTES as their base64 text and its JSON values as
// JSON strings, which DML does not.
func (e *env) insert(t testing.TB, name string, schema bq.Schema, rows [][]bq.Value) {
	t.Helper()
	cols := make([]string, len(schema))
	for i, f := range schema {
		cols[i] = quoteIdent(f.Name)
	}
	for start := 0; start < len(rows); start += 1000 {
		var b strings.Builder
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", quoteIdent(e.dataset+"."+name), strings.Join(cols, ", "))
		for i, r := range rows[start:min(start+1000, len(rows))] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(")
			for c, v := range r {
				if c > 0 {
					b.WriteString(", ")
				}
				b.WriteString(sqlValue(schema[c], v, true))
			}
			b.WriteString(")")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		job, err := e.emu.client.Query(b.String()).Run(ctx)
		if err == nil {
			var st *bq.JobStatus
			if st, err = job.Wait(ctx); err == nil {
				err = st.Err()
			}
		}
		cancel()
		if err != nil {
			t.Fatalf("insert into %s: %v", name, err)
		}
	}
}

// sqlValue renders a client-library value as a GoogleSQL literal.
func sqlValue(f *bq.FieldSchema, v bq.Value, top bool) string {
	if f.Repeated && top {
		var parts []string
		for _, e := range v.([]bq.Value) {
			parts = append(parts, sqlValue(f, e, false))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	if v == nil {
		return "NULL"
	}
	switch x := v.(type) {
	case civil.Date:
		return "DATE '" + x.String() + "'"
	case civil.DateTime:
		return "DATETIME '" + x.Date.String() + " " + x.Time.String() + "'"
	case time.Time:
		return "TIMESTAMP '" + x.UTC().Format("2006-01-02 15:04:05.999999") + "+00:00'"
	case *big.Rat:
		return "NUMERIC '" + x.FloatString(9) + "'"
	case []byte:
		return "FROM_BASE64('" + base64.StdEncoding.EncodeToString(x) + "')"
	case string:
		if f.Type == bq.JSONFieldType {
			return "JSON " + quoteString(x)
		}
		return quoteString(x)
	case float64:
		return fmt.Sprintf("CAST('%v' AS FLOAT64)", x)
	case []bq.Value: // STRUCT
		parts := make([]string, len(x))
		for i, sub := range f.Schema {
			parts[i] = sqlValue(sub, x[i], true) + " AS " + quoteIdent(sub.Name)
		}
		return "STRUCT(" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprint(v)
}

func (f *fixture) Create(t *testing.T, name string, cols []sourcetest.ColumnDef, rows [][]any) {
	t.Helper()
	schema := make(bq.Schema, len(cols))
	var pk []string
	for i, c := range cols {
		schema[i] = &bq.FieldSchema{Name: c.Name, Type: fieldType[c.Type], Required: c.NotNull}
		if c.Type == sourcetest.Decimal {
			schema[i].Precision, schema[i].Scale = 12, 2
		}
		if c.PrimaryKey {
			pk = append(pk, c.Name)
		}
	}
	f.createTable(t, name, schema, pk)
	vals := make([][]bq.Value, len(rows))
	for r, row := range rows {
		vals[r] = make([]bq.Value, len(row))
		for i, v := range row {
			vals[r][i] = bqValue(cols[i].Type, v)
		}
	}
	f.insert(t, name, schema, vals)
}

// bqValue turns a canonical fixture value into what the client library
// uploads for the column type.
func bqValue(ty sourcetest.Type, v any) bq.Value {
	if v == nil {
		return nil
	}
	switch ty {
	case sourcetest.Timestamp:
		return civil.DateTimeOf(v.(time.Time).UTC())
	case sourcetest.Date:
		d, _ := civil.ParseDate(v.(string))
		return d
	case sourcetest.Decimal:
		r, _ := new(big.Rat).SetString(v.(string))
		return r
	}
	return v
}

var seriesSchema = bq.Schema{
	{Name: "id", Type: bq.IntegerFieldType, Required: true},
	{Name: "ts", Type: bq.TimestampFieldType, Required: true},
	{Name: "name", Type: bq.StringFieldType},
	{Name: "amount", Type: float64Type},
}

// emulatorSeriesRows is the largest series also written to the emulator:
// it stores rows in SQLite through ZetaSQL and takes minutes for the
// million-row series, which only plain Storage Read reads (Cancel,
// BoundedMemory) use; those are generated in the Storage Read server's
// DuckDB only, and the emulator holds their schema.
const emulatorSeriesRows = 10_000

func (f *fixture) CreateSeries(t *testing.T, name string, n int64) {
	t.Helper()
	createSeries(t, f.env, name, n)
}

func createSeries(t testing.TB, e *env, name string, n int64) {
	e.createTable(t, name, seriesSchema, []string{"id"})
	if n <= emulatorSeriesRows {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		rows := make([][]bq.Value, n)
		for i := range rows {
			id := int64(i)
			rows[i] = []bq.Value{id, base.Add(time.Duration(id) * time.Second), fmt.Sprintf("row-%d", id), float64(id) / 4}
		}
		e.insert(t, name, seriesSchema, rows)
	}
	seriesInDuckDB(t, e.srv, e.dataset, name, n)
}

func seriesInDuckDB(t testing.TB, srv *bqread.Server, dataset, name string, n int64) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		"CREATE SCHEMA IF NOT EXISTS \"" + dataset + "\"",
		fmt.Sprintf(`CREATE TABLE %s AS SELECT i AS id,
			TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL 1 SECOND AS ts,
			'row-' || i AS name, i / 4.0::DOUBLE AS amount
			FROM range(0, %d) AS g(i)`, bqread.Table(dataset, name), n),
	} {
		if err := srv.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}
