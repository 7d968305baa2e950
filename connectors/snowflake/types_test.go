package snowflake

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// typeCases covers every mapped type in each of its wire encodings
// (narrow and wide integers, decimal128, timestamps as scaled int64,
// epoch/fraction structs and TIMESTAMP_TZ's two- and three-field structs),
// with values before the epoch and in other time zones.
var (
	plus2   = time.FixedZone("+02:00", 2*3600)
	minus5  = time.FixedZone("-05:00", -5*3600)
	preEpoc = time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC)
	moment  = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

	typeCases = []struct {
		ddl  string
		typ  arrow.DataType
		in   any // value inserted
		want any // canonical value read (sourcetest.Canon)
	}{
		{"NUMBER(38,0)", arrow.PrimitiveTypes.Int64, int64(9223372036854775807), int64(9223372036854775807)},
		{"NUMBER(10,0)", arrow.PrimitiveTypes.Int64, int64(-5), int64(-5)},
		{"NUMBER(12,2)", &arrow.Decimal128Type{Precision: 12, Scale: 2}, "-12345.67", "-12345.67"},
		{"NUMBER(38,10)", &arrow.Decimal128Type{Precision: 38, Scale: 10}, "123456789012345678.0000000001", "123456789012345678.0000000001"},
		{"FLOAT", arrow.PrimitiveTypes.Float64, -2.5e-3, -2.5e-3},
		{"VARCHAR", arrow.BinaryTypes.String, "héllo ✓", "héllo ✓"},
		{"BOOLEAN", arrow.FixedWidthTypes.Boolean, true, true},
		{"DATE", arrow.FixedWidthTypes.Date32, "1969-07-20", "1969-07-20"},
		{"TIMESTAMP_NTZ(9)", timestampType, preEpoc, preEpoc},
		{"TIMESTAMP_NTZ(3)", timestampType, moment, moment.Truncate(time.Millisecond)},
		{"TIMESTAMP_NTZ(0)", timestampType, preEpoc, preEpoc.Truncate(time.Second)},
		{"TIMESTAMP_LTZ(6)", timestamptzType, moment.In(plus2), moment},
		{"TIMESTAMP_LTZ(9)", timestamptzType, preEpoc.In(minus5), preEpoc},
		{"TIMESTAMP_TZ(3)", timestamptzType, moment.In(minus5), moment.Truncate(time.Millisecond)},
		{"TIMESTAMP_TZ(9)", timestamptzType, preEpoc.In(plus2), preEpoc},
		{"VARIANT", arrow.BinaryTypes.String, `{"a":[1,2]}`, `{"a":[1,2]}`},
		{"OBJECT", arrow.BinaryTypes.String, `{"k":"v"}`, `{"k":"v"}`},
		{"ARRAY", arrow.BinaryTypes.String, `[1,"x"]`, `[1,"x"]`},
		{"BINARY", arrow.BinaryTypes.Binary, []byte{0, 1, 0xfe}, []byte{0, 1, 0xfe}},
	}
)

func TestTypes(t *testing.T) {
	// A non-UTC offset on the wire: the reader must take the instant.
	srv := newServer(t, sfserver.Config{TZOffsetMinutes: -330})
	cols := []sfserver.Column{{Name: "ID", Type: "NUMBER(38,0)", NotNull: true, PrimaryKey: true}}
	row, nulls := []any{int64(1)}, []any{int64(2)}
	for i, c := range typeCases {
		cols = append(cols, sfserver.Column{Name: "C" + string(rune('A'+i)), Type: c.ddl})
		row, nulls = append(row, c.in), append(nulls, nil)
	}
	cols = append(cols, sfserver.Column{Name: "T", Type: "TIME(9)"})
	row, nulls = append(row, "12:34:56.789012"), append(nulls, nil)
	if err := srv.CreateTable(context.Background(), "types", cols, [][]any{row, nulls}); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	var schema *arrow.Schema
	var got [][]any
	var timeVals []arrow.Time64
	err := src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: "types"}, OrderBy: []string{"ID"}},
		func(rec arrow.RecordBatch) error {
			schema = rec.Schema()
			for r := 0; r < int(rec.NumRows()); r++ {
				vals := make([]any, rec.NumCols())
				for c := range vals {
					vals[c] = sourcetest.Canon(rec.Column(c), r)
				}
				got = append(got, vals)
				tc := rec.Column(int(rec.NumCols()) - 1).(*array.Time64)
				timeVals = append(timeVals, tc.Value(r))
				if r == 1 && !tc.IsNull(r) {
					t.Error("TIME NULL read as a value")
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("read %d rows, want 2", len(got))
	}
	for i, c := range typeCases {
		f := schema.Field(i + 1)
		if !arrow.TypeEqual(f.Type, c.typ) {
			t.Errorf("%s: Arrow type %s, want %s", c.ddl, f.Type, c.typ)
		}
		if !sameValue(got[0][i+1], c.want) {
			t.Errorf("%s: read %#v, want %#v", c.ddl, got[0][i+1], c.want)
		}
		if got[1][i+1] != nil {
			t.Errorf("%s: NULL read as %#v", c.ddl, got[1][i+1])
		}
	}
	if want := arrow.Time64((12*3600+34*60+56)*1e9 + 789012000); timeVals[0] != want {
		t.Errorf("TIME read as %d ns, want %d", timeVals[0], want)
	}

	// Discover reports the types Read produces, and the declared types.
	s, err := src.Discover(context.Background(), connectors.Table{Name: "types"})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range s.Columns {
		if !arrow.TypeEqual(c.Type, schema.Field(i).Type) {
			t.Errorf("%s: discovered %s, read %s", c.Name, c.Type, schema.Field(i).Type)
		}
	}
	if st := s.Columns[3].SourceType; st != "NUMBER(12,2)" {
		t.Errorf("source type %q, want NUMBER(12,2)", st)
	}
}

func sameValue(got, want any) bool {
	if g, ok := got.(time.Time); ok {
		w, ok := want.(time.Time)
		return ok && g.Equal(w)
	}
	return reflect.DeepEqual(got, want)
}

// A NUMBER(38,0) value beyond int64 fails the read with advice, rather
// than being wrapped around or silently dropped.
func TestNumberOverflow(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	cols := []sfserver.Column{{Name: "N", Type: "NUMBER(38,0)"}}
	if err := srv.CreateTable(context.Background(), "big", cols, [][]any{{"100000000000000000000"}}); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	_, _, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: connectors.Table{Name: "big"}})
	if !connectors.IsPermanent(err) || errors.Is(err, connectors.ErrNotFound) {
		t.Fatalf("overflow: %v, want a permanent error", err)
	}
}

// Watermarks of each Go type bind and compare as the column's type.
func TestWatermarkTypes(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	cols := []sfserver.Column{{Name: "I", Type: "NUMBER(38,0)"}, {Name: "F", Type: "FLOAT"}, {Name: "S", Type: "VARCHAR"},
		{Name: "NTZ", Type: "TIMESTAMP_NTZ(9)"}, {Name: "LTZ", Type: "TIMESTAMP_LTZ(9)"}}
	var rows [][]any
	for i := 0; i < 10; i++ {
		ts := moment.Add(time.Duration(i) * time.Second)
		rows = append(rows, []any{int64(i), float64(i), string(rune('a' + i)), ts, ts})
	}
	if err := srv.CreateTable(context.Background(), "wm", cols, rows); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	for col, v := range map[string]any{"I": int64(6), "F": 6.0, "S": "g", "NTZ": moment.Add(6 * time.Second).In(plus2), "LTZ": moment.Add(6 * time.Second)} {
		_, got, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: connectors.Table{Name: "wm"},
			Columns: []string{"I"}, After: &connectors.Watermark{Columns: []string{col}, Values: []any{v}}, OrderBy: []string{col}})
		if err != nil {
			t.Fatalf("%s: %v", col, err)
		}
		if len(got) != 3 || got[0][0] != int64(7) {
			t.Errorf("after %s=%v: %v, want ids 7..9", col, v, got)
		}
	}
}
