package postgres

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// typeCase is one column of the type table: its DDL, the SQL literals of
// its rows (row 0 of every column first), the Arrow type it must read as
// and the canonical values it must read back.
type typeCase struct {
	name, ddl string
	arrow     string
	lits      []string
	want      []any
}

var ts0 = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

var typeCases = []typeCase{
	{"i2", "smallint", "int16", []string{"-32768", "NULL", "7"}, []any{int64(-32768), nil, int64(7)}},
	{"i4", "integer", "int32", []string{"2147483647", "NULL", "-1"}, []any{int64(2147483647), nil, int64(-1)}},
	{"i8", "bigint", "int64", []string{"-9223372036854775808", "NULL", "0"}, []any{int64(math.MinInt64), nil, int64(0)}},
	{"f4", "real", "float32", []string{"1.5", "NULL", "'-Infinity'"}, []any{1.5, nil, math.Inf(-1)}},
	{"f8", "double precision", "float64", []string{"'NaN'", "NULL", "'Infinity'"}, []any{math.NaN(), nil, math.Inf(1)}},
	{"b", "boolean", "bool", []string{"true", "NULL", "false"}, []any{true, nil, false}},
	{"t", "text", "utf8", []string{"'héllo, 世界 ✓ 🚀'", "NULL", "''"}, []any{"héllo, 世界 ✓ 🚀", nil, ""}},
	{"vc", "varchar(10)", "utf8", []string{"'ünïcödé'", "NULL", "'x'"}, []any{"ünïcödé", nil, "x"}},
	{"ch", "char(4)", "utf8", []string{"'ab'", "NULL", "'abcd'"}, []any{"ab  ", nil, "abcd"}},
	{"nm", "name", "utf8", []string{"'pg_class'", "NULL", "'x'"}, []any{"pg_class", nil, "x"}},
	{"ts", "timestamp", "timestamp[us]", []string{"'2026-03-04 05:06:07.123456'", "'infinity'", "'-infinity'"}, []any{ts0, nil, nil}},
	// Written at +05:30, read back as the same instant.
	{"tz", "timestamptz", "timestamp[us, tz=UTC]", []string{"'2026-03-04 10:36:07.123456+05:30'", "'-infinity'", "'1969-12-31 23:59:59.999999+00'"},
		[]any{ts0, nil, time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC)}},
	{"d", "date", "date32", []string{"'1999-12-31'", "'infinity'", "'-infinity'"}, []any{"1999-12-31", nil, nil}},
	{"dec", "numeric(12,2)", "decimal(12, 2)", []string{"-1234567890.12", "'NaN'", "0"}, []any{"-1234567890.12", nil, "0.00"}},
	{"dec38", "numeric(38,4)", "decimal(38, 4)", []string{"9999999999999999999999999999999999.9999", "NULL", "-0.0001"},
		[]any{"9999999999999999999999999999999999.9999", nil, "-0.0001"}},
	{"num", "numeric", "utf8", []string{"123456789012345678901234567890.000000000000000000001", "'NaN'", "'-Infinity'"},
		[]any{"123456789012345678901234567890.000000000000000000001", "NaN", "-Infinity"}},
	{"wide", "numeric(50,10)", "utf8", []string{"-0.0000000001", "'NaN'", "1e39"},
		nil}, // checked against the server's own text below
	{"js", "json", "utf8", []string{`'{"b": [1, 2], "a": null}'`, "NULL", "'[]'"}, []any{`{"b": [1, 2], "a": null}`, nil, "[]"}},
	{"jb", "jsonb", "utf8", []string{`'{"b": [1, 2], "a": "é"}'`, "NULL", "'3'"}, []any{`{"a": "é", "b": [1, 2]}`, nil, "3"}},
	{"u", "uuid", "utf8", []string{"'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'", "NULL", "'00000000-0000-0000-0000-000000000000'"},
		[]any{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", nil, "00000000-0000-0000-0000-000000000000"}},
	{"by", "bytea", "binary", []string{`'\x00ff10'`, "NULL", `''`}, []any{[]byte{0, 0xff, 0x10}, nil, []byte{}}},
	{"ai", "integer[]", "list<item: int32, nullable>", []string{"'{1,NULL,3}'", "NULL", "'{}'"}, []any{[]any{int64(1), nil, int64(3)}, nil, []any{}}},
	{"a2", "bigint[]", "list<item: int64, nullable>", []string{"'{{1,2},{3,4}}'", "'{5}'", "'[3:4]={7,8}'"},
		[]any{[]any{int64(1), int64(2), int64(3), int64(4)}, []any{int64(5)}, []any{int64(7), int64(8)}}},
	{"at", "text[]", "list<item: utf8, nullable>", []string{`'{"a b",NULL,"ü"}'`, "'{}'", "NULL"}, []any{[]any{"a b", nil, "ü"}, []any{}, nil}},
	{"an", "numeric(6,2)[]", "list<item: decimal(6, 2), nullable>", []string{"'{1.5,-2}'", "NULL", "'{NaN}'"}, []any{[]any{"1.50", "-2.00"}, nil, []any{nil}}},
	{"atz", "timestamptz[]", "list<item: timestamp[us, tz=UTC], nullable>", []string{"ARRAY['2026-03-04 10:36:07.123456+05:30'::timestamptz]", "'{infinity}'", "NULL"},
		[]any{[]any{ts0}, []any{nil}, nil}},
	{"ab", "boolean[]", "list<item: bool, nullable>", []string{"'{t,f}'", "NULL", "'{}'"}, []any{[]any{true, false}, nil, []any{}}},
	// Types without a binary decoder arrive in text format, as text.
	{"iv", "interval", "utf8", []string{"'1 day 02:03:04'", "NULL", "'-1 month'"}, []any{"1 day 02:03:04", nil, "-1 mons"}},
	{"ip", "inet", "utf8", []string{"'10.0.0.1/8'", "NULL", "'::1'"}, []any{"10.0.0.1/8", nil, "::1"}},
	{"mood", "mood", "utf8", []string{"'happy'", "NULL", "'sad'"}, []any{"happy", nil, "sad"}},
	{"tm", "time", "utf8", []string{"'12:34:56.5'", "NULL", "'00:00'"}, []any{"12:34:56.5", nil, "00:00:00"}},
}

func TestTypes(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	db.exec(t, "CREATE TYPE mood AS ENUM ('sad', 'happy')")
	ddl := "CREATE TABLE types (row int PRIMARY KEY"
	for _, c := range typeCases {
		ddl += ", " + c.name + " " + c.ddl
	}
	db.exec(t, ddl+")")
	for r := 0; r < 3; r++ {
		ins := "INSERT INTO types VALUES (" + string(rune('0'+r))
		for _, c := range typeCases {
			ins += ", " + c.lits[r]
		}
		db.exec(t, ins+")")
	}
	ctx := context.Background()
	s, err := src.Discover(ctx, connectors.Table{Name: "types"})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]any
	var fields []arrow.Field
	err = src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Name: "types"}, OrderBy: []string{"row"}}, func(rec arrow.RecordBatch) error {
		fields = rec.Schema().Fields()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]any, rec.NumCols())
			for c := range row {
				row[c] = canon(rec.Column(c), i)
			}
			got = append(got, row)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d rows, want 3", len(got))
	}
	wide := serverText(t, db, "SELECT wide::text FROM types ORDER BY row")
	for i, c := range typeCases {
		col := i + 1
		if ty := fields[col].Type.String(); ty != c.arrow {
			t.Errorf("%s (%s): read as %s, want %s", c.name, c.ddl, ty, c.arrow)
		}
		if !arrow.TypeEqual(s.Columns[col].Type, fields[col].Type) {
			t.Errorf("%s: Discover says %s, Read gives %s", c.name, s.Columns[col].Type, fields[col].Type)
		}
		want := c.want
		if c.name == "wide" {
			want = wide
		}
		for r := range got {
			if !sameCanon(got[r][col], want[r]) {
				t.Errorf("%s (%s) row %d: got %#v, want %#v", c.name, c.ddl, r, got[r][col], want[r])
			}
		}
	}
}

// TestTimestampRangeEnds reads PostgreSQL's extreme timestamps: the
// latest overflow Arrow's int64 microseconds since 1970 and become NULL,
// the earliest fit.
func TestTimestampRangeEnds(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	_, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: connectors.Table{Query: `SELECT
		'294276-12-31 23:59:59.999999'::timestamp AS hi, '4713-01-01 00:00:00 BC'::timestamptz AS lo, '5874897-12-31'::date AS d`}})
	if err != nil {
		t.Fatal(err)
	}
	lo := time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC)
	if rows[0][0] != nil || !lo.Equal(rows[0][1].(time.Time)) || rows[0][2] != "5874897-12-31" {
		t.Errorf("got %v, want [<nil> %v 5874897-12-31]", rows[0], lo)
	}
}

// canon is sourcetest.Canon, extended to lists of any element type.
func canon(arr arrow.Array, i int) any {
	if l, ok := arr.(interface {
		ValueOffsets(int) (int64, int64)
		ListValues() arrow.Array
	}); ok && !arr.IsNull(i) {
		start, end := l.ValueOffsets(i)
		out := []any{}
		for j := start; j < end; j++ {
			out = append(out, canon(l.ListValues(), int(j)))
		}
		return out
	}
	return sourcetest.Canon(arr, i)
}

func sameCanon(got, want any) bool {
	if g, ok := got.(float64); ok && math.IsNaN(g) {
		w, ok := want.(float64)
		return ok && math.IsNaN(w)
	}
	if g, ok := got.(time.Time); ok {
		w, ok := want.(time.Time)
		return ok && g.Equal(w)
	}
	if g, ok := got.([]any); ok {
		w, ok := want.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range g {
			if !sameCanon(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// serverText returns the single text column of query, NULL as nil.
func serverText(t *testing.T, db *testDB, query string) []any {
	t.Helper()
	rows, err := db.conn.Query(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []any
	for rows.Next() {
		var s *string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			out = append(out, nil)
		} else {
			out = append(out, *s)
		}
	}
	return out
}
