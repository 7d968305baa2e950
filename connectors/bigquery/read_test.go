package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"sync"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// Every BigQuery type this source maps, with a row of NULLs, written
// through the REST API and read through the Storage Read API.
func TestTypes(t *testing.T) {
	e := newEnv(t)
	src := e.open(t, nil)
	schema := bq.Schema{
		{Name: "id", Type: bq.IntegerFieldType, Required: true},
		{Name: "num", Type: bq.NumericFieldType},
		{Name: "f", Type: float64Type},
		{Name: "b", Type: bq.BooleanFieldType},
		{Name: "s", Type: bq.StringFieldType},
		{Name: "raw", Type: bq.BytesFieldType},
		{Name: "d", Type: bq.DateFieldType},
		{Name: "ts", Type: bq.TimestampFieldType},
		{Name: "dt", Type: bq.DateTimeFieldType},
		{Name: "j", Type: bq.JSONFieldType},
		{Name: "nums", Type: bq.IntegerFieldType, Repeated: true},
		{Name: "rec", Type: bq.RecordFieldType, Schema: bq.Schema{
			{Name: "a", Type: bq.IntegerFieldType}, {Name: "tags", Type: bq.StringFieldType, Repeated: true}}},
	}
	e.createTable(t, "types", schema, []string{"id"})
	ts := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	num, _ := new(big.Rat).SetString("-123456789.123456789")
	e.insert(t, "types", schema, [][]bq.Value{
		{int64(1), num, 2.5, true, "ünï", []byte{0, 255}, civil.Date{Year: 2026, Month: 3, Day: 4}, ts,
			civil.DateTimeOf(ts), `{"k":[1,null]}`, []bq.Value{int64(3), int64(-4)}, []bq.Value{int64(7), []bq.Value{"x", "y"}}},
		// The emulator refuses NULL for an ARRAY (BigQuery stores it as []).
		{int64(2), nil, nil, nil, nil, nil, nil, nil, nil, nil, []bq.Value{}, nil},
	})

	s, err := src.Discover(context.Background(), connectors.Table{Name: "types"})
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"int64", "decimal(38, 9)", "float64", "bool", "utf8", "binary", "date32", "timestamp[us, tz=UTC]",
		"timestamp[us]", "utf8", "list<item: int64, nullable>", "struct<a: int64, tags: list<item: utf8, nullable>>"}
	for i, c := range s.Columns {
		if c.Type.String() != wantTypes[i] {
			t.Errorf("column %s: %s, want %s", c.Name, c.Type, wantTypes[i])
		}
	}
	if got := s.Columns[11].SourceType; got != "STRUCT<a INT64, tags ARRAY<STRING>>" {
		t.Errorf("source type %q", got)
	}
	var recs []arrow.RecordBatch
	err = src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: "types"}, OrderBy: []string{"id"}}, func(rec arrow.RecordBatch) error {
		rec.Retain()
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tbl := array.NewTableFromRecords(recs[0].Schema(), recs)
	defer tbl.Release()
	if tbl.NumRows() != 2 {
		t.Fatalf("%d rows", tbl.NumRows())
	}
	for i, f := range tbl.Schema().Fields() {
		if !arrow.TypeEqual(f.Type, s.Columns[i].Type) {
			t.Errorf("column %s read as %s, discovered as %s", f.Name, f.Type, s.Columns[i].Type)
		}
	}
	rec := recs[0]
	want := []any{int64(1), "-123456789.123456789", 2.5, true, "ünï", []byte{0, 255}, "2026-03-04", ts, ts, nil, []int64{3, -4}}
	for c, w := range want {
		got := sourcetest.Canon(rec.Column(c), 0)
		if w == nil { // JSON: compared by meaning below
			var v any
			if json.Unmarshal([]byte(got.(string)), &v) != nil || !reflect.DeepEqual(v, map[string]any{"k": []any{1.0, nil}}) {
				t.Errorf("json %v", got)
			}
			continue
		}
		if gt, ok := got.(time.Time); ok && gt.Equal(w.(time.Time)) {
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("column %s: %#v, want %#v", rec.Schema().Field(c).Name, got, w)
		}
	}
	st := rec.Column(11).(*array.Struct)
	if a := st.Field(0).(*array.Int64).Value(0); a != 7 || st.Field(1).ValueStr(0) != `["x","y"]` {
		t.Errorf("struct %v", st)
	}
	// Row 2: every nullable column NULL; an ARRAY reads as empty (BigQuery
	// has no NULL arrays).
	for c := 1; c < int(rec.NumCols()); c++ {
		null := rec.Column(c).IsNull(1)
		if c == 10 {
			if !null && sourcetest.Canon(rec.Column(c), 1) != nil && len(sourcetest.Canon(rec.Column(c), 1).([]int64)) != 0 {
				t.Errorf("NULL array read as %v", sourcetest.Canon(rec.Column(c), 1))
			}
			continue
		}
		if !null {
			t.Errorf("column %s: %v, want NULL", rec.Schema().Field(c).Name, sourcetest.Canon(rec.Column(c), 1))
		}
	}
	for _, r := range recs {
		r.Release()
	}
}

// A plain read uses several streams, each row once; the watermark becomes
// the session's row restriction, and columns come in the requested order
// although the API sends them in table order.
func TestParallelStreamsAndRestriction(t *testing.T) {
	e := newEnv(t)
	const n = 50_000
	createSeries(t, e, "series", n)
	src := e.open(t, map[string]string{"max_streams": "4"})
	var mu sync.Mutex
	streams := 0
	e.srv.Fault = func(method, _ string, sent int64) error {
		if method == "ReadRows" && sent < 0 {
			mu.Lock()
			streams++
			mu.Unlock()
		}
		return nil
	}
	read := func(req connectors.ReadRequest) ([]string, map[int64]int) {
		names, rows, err := sourcetest.Rows(context.Background(), src, req)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]int{}
		for _, r := range rows {
			seen[r[1].(int64)]++
		}
		return names, seen
	}
	names, seen := read(connectors.ReadRequest{Table: connectors.Table{Name: "series"}, Columns: []string{"name", "id"}})
	if !reflect.DeepEqual(names, []string{"name", "id"}) || len(seen) != n || streams != 4 {
		t.Fatalf("columns %v, %d distinct ids of %d, %d streams", names, len(seen), n, streams)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("id %d read %d times", id, c)
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	wm := &connectors.Watermark{Columns: []string{"ts", "id"}, Values: []any{base.Add(30_000 * time.Second), int64(29_999)}}
	_, seen = read(connectors.ReadRequest{Table: connectors.Table{Name: "series"}, Columns: []string{"name", "id"}, After: wm})
	if len(seen) != n-30_000 || seen[30_000] != 1 || seen[29_999] != 0 {
		t.Fatalf("after the watermark: %d rows", len(seen))
	}
	_, seen = read(connectors.ReadRequest{Table: connectors.Table{Name: "series"}, Columns: []string{"name", "id"}, Limit: 10})
	if len(seen) != 10 {
		t.Fatalf("limit 10 read %d rows", len(seen))
	}
}

// A query import runs the query into a result table and reads that through
// the Storage Read API; ordering, limit and a watermark wrap the query.
func TestQueryImport(t *testing.T) {
	e := newEnv(t)
	createSeries(t, e, "series", 100)
	src := e.open(t, nil)
	q := connectors.Table{Query: "SELECT id, ts, name FROM \"" + e.dataset + "\".\"series\" WHERE id >= 10 AND id < 60"}
	_, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: q})
	if err != nil || len(rows) != 50 {
		t.Fatalf("query: %d rows, %v", len(rows), err)
	}
	wm := &connectors.Watermark{Columns: []string{"ts", "id"},
		Values: []any{time.Date(2026, 1, 1, 0, 0, 20, 0, time.UTC), int64(20)}}
	names, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{
		Table: q, Columns: []string{"id", "name"}, After: wm, OrderBy: []string{"ts", "id"}, Limit: 5})
	want := [][]any{{int64(21), "row-21"}, {int64(22), "row-22"}, {int64(23), "row-23"}, {int64(24), "row-24"}, {int64(25), "row-25"}}
	if err != nil || !reflect.DeepEqual(names, []string{"id", "name"}) || !reflect.DeepEqual(rows, want) {
		t.Fatalf("incremental query: %v %v, %v", names, rows, err)
	}
	// Staging tables are dropped after each read.
	it := e.emu.client.Dataset(e.dataset).Tables(context.Background())
	for {
		tb, err := it.Next()
		if err != nil {
			break
		}
		if tb.TableID != "series" {
			t.Errorf("staging table %s left behind", tb.TableID)
		}
	}
	_, err = src.Discover(context.Background(), connectors.Table{Query: "SELECT nope FROM `" + e.dataset + ".series`"})
	if err == nil {
		t.Error("a bad query discovered")
	}
}

// A cancelled multi-stream read stops every stream and returns the
// context's error, also while a query job runs.
func TestCancelQuery(t *testing.T) {
	e := newEnv(t)
	createSeries(t, e, "series", 100)
	src := e.open(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Name: "series"}, OrderBy: []string{"id"}}, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ordered read: %v", err)
	}
}
