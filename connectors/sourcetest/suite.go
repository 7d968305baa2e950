package sourcetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// Run runs every conformance test against h.
func Run(t *testing.T, h Harness) {
	t.Run("Discover", func(t *testing.T) { testDiscover(t, h) })
	t.Run("TypeMatrix", func(t *testing.T) { testTypeMatrix(t, h) })
	t.Run("Empty", func(t *testing.T) { testEmpty(t, h) })
	t.Run("ProjectionOrderLimit", func(t *testing.T) { testProjection(t, h) })
	t.Run("WatermarkTies", func(t *testing.T) { testWatermarkTies(t, h) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, h) })
	t.Run("BoundedMemory", func(t *testing.T) { testBoundedMemory(t, h) })
}

// Rows reads everything req selects and returns the column names and the
// rows in canonical form.
func Rows(ctx context.Context, src connectors.Source, req connectors.ReadRequest) ([]string, [][]any, error) {
	var names []string
	var rows [][]any
	err := src.Read(ctx, req, func(rec arrow.RecordBatch) error {
		if names == nil {
			for _, f := range rec.Schema().Fields() {
				names = append(names, f.Name)
			}
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]any, rec.NumCols())
			for c := range row {
				row[c] = Canon(rec.Column(c), i)
			}
			rows = append(rows, row)
		}
		return nil
	})
	return names, rows, err
}

var base = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

func matrix(h Harness) ([]ColumnDef, [][]any) {
	all := []ColumnDef{
		{Name: "id", Type: Int64, NotNull: true, PrimaryKey: true},
		{Name: "i32", Type: Int32},
		{Name: "f64", Type: Float64},
		{Name: "flag", Type: Bool},
		{Name: "label", Type: String},
		{Name: "ts", Type: Timestamp, NotNull: true},
		{Name: "tstz", Type: TimestampTZ},
		{Name: "day", Type: Date},
		{Name: "amount", Type: Decimal},
		{Name: "doc", Type: JSON},
		{Name: "raw", Type: Bytes},
		{Name: "nums", Type: ListInt64},
	}
	vals := [][]any{
		{int64(1), int64(-7), 3.25, true, "héllo, 世界 ✓", base, base.Add(time.Hour), "2026-03-04", "12.34",
			`{"a":1,"b":{"c":"x"}}`, []byte{0, 1, 2, 255}, []int64{1, 2, 3}},
		{int64(2), int64(2147483647), -0.5, false, "", base.Add(time.Second), time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), "1970-01-01", "-0.01",
			`[1,"two",null]`, []byte{}, []int64{}},
		// every nullable column NULL
		{int64(3), nil, nil, nil, nil, base.Add(2 * time.Second), nil, nil, nil, nil, nil, nil},
	}
	var cols []ColumnDef
	var keep []int
	for i, c := range all {
		if h.supports(c.Type) {
			cols = append(cols, c)
			keep = append(keep, i)
		}
	}
	rows := make([][]any, len(vals))
	for r, v := range vals {
		for _, i := range keep {
			rows[r] = append(rows[r], v[i])
		}
	}
	return cols, rows
}

func testDiscover(t *testing.T, h Harness) {
	f := h.Open(t)
	cols, rows := matrix(h)
	f.Create(t, "matrix", cols, rows)
	s, err := f.Source().Discover(context.Background(), f.Table("matrix"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Columns) != len(cols) {
		t.Fatalf("discovered %d columns, want %d", len(s.Columns), len(cols))
	}
	for i, c := range cols {
		got := s.Columns[i]
		if got.Name != c.Name {
			t.Errorf("column %d: name %q, want %q", i, got.Name, c.Name)
		}
		if got.Nullable == c.NotNull {
			t.Errorf("column %s: nullable=%v, want %v", c.Name, got.Nullable, !c.NotNull)
		}
		if got.Type == nil || got.SourceType == "" {
			t.Errorf("column %s: missing Arrow or source type", c.Name)
		}
		if want := wantTypeID(c.Type); want != nil && !want[got.Type.ID()] {
			t.Errorf("column %s: Arrow type %s not expected for %v", c.Name, got.Type, c.Type)
		}
	}
	if !reflect.DeepEqual(s.PrimaryKey, []string{"id"}) {
		t.Errorf("primary key %v, want [id]", s.PrimaryKey)
	}
	_, err = f.Source().Discover(context.Background(), f.Table("no_such_table"))
	if !errors.Is(err, connectors.ErrNotFound) || !connectors.IsPermanent(err) {
		t.Errorf("missing table: err %v, want ErrNotFound (permanent)", err)
	}
}

func wantTypeID(ty Type) map[arrow.Type]bool {
	set := func(ids ...arrow.Type) map[arrow.Type]bool {
		m := map[arrow.Type]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	switch ty {
	case Int64, Int32:
		return set(arrow.INT64, arrow.INT32, arrow.INT16, arrow.DECIMAL128)
	case Float64:
		return set(arrow.FLOAT64, arrow.FLOAT32)
	case Bool:
		return set(arrow.BOOL)
	case String, JSON:
		return set(arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW, arrow.EXTENSION)
	case Timestamp, TimestampTZ:
		return set(arrow.TIMESTAMP)
	case Date:
		return set(arrow.DATE32, arrow.DATE64)
	case Decimal:
		return set(arrow.DECIMAL128, arrow.DECIMAL256, arrow.STRING, arrow.FLOAT64)
	case Bytes:
		return set(arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW)
	case ListInt64:
		return set(arrow.LIST, arrow.LARGE_LIST)
	}
	return nil
}

func testTypeMatrix(t *testing.T, h Harness) {
	f := h.Open(t)
	cols, want := matrix(h)
	f.Create(t, "matrix", cols, want)
	names, got, err := Rows(context.Background(), f.Source(), connectors.ReadRequest{Table: f.Table("matrix"), OrderBy: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for r := range want {
		for c, col := range cols {
			if names[c] != col.Name {
				t.Fatalf("column %d is %q, want %q", c, names[c], col.Name)
			}
			if !sameValue(col.Type, got[r][c], want[r][c]) {
				t.Errorf("row %d column %s: got %#v, want %#v", r, col.Name, got[r][c], want[r][c])
			}
		}
	}
}

// sameValue compares a read value with the fixture value; JSON compares
// by meaning because warehouses re-serialise it.
func sameValue(ty Type, got, want any) bool {
	if ty == JSON && got != nil && want != nil {
		gs, ok := got.(string)
		if !ok {
			return false
		}
		var g, w any
		if json.Unmarshal([]byte(gs), &g) != nil || json.Unmarshal([]byte(want.(string)), &w) != nil {
			return false
		}
		return reflect.DeepEqual(g, w)
	}
	if gt, ok := got.(time.Time); ok {
		wt, ok := want.(time.Time)
		return ok && gt.Equal(wt)
	}
	return reflect.DeepEqual(got, want)
}

func testEmpty(t *testing.T, h Harness) {
	f := h.Open(t)
	f.Create(t, "empty", []ColumnDef{{Name: "id", Type: Int64, NotNull: true, PrimaryKey: true}, {Name: "v", Type: String}}, nil)
	s, err := f.Source().Discover(context.Background(), f.Table("empty"))
	if err != nil || len(s.Columns) != 2 {
		t.Fatalf("discover empty table: %v %+v", err, s)
	}
	_, rows, err := Rows(context.Background(), f.Source(), connectors.ReadRequest{Table: f.Table("empty")})
	if err != nil || len(rows) != 0 {
		t.Fatalf("read empty table: %d rows, err %v", len(rows), err)
	}
}

func testProjection(t *testing.T, h Harness) {
	f := h.Open(t)
	f.CreateSeries(t, "series", 100)
	names, rows, err := Rows(context.Background(), f.Source(), connectors.ReadRequest{
		Table: f.Table("series"), Columns: []string{"name", "id"}, OrderBy: []string{"id"}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, []string{"name", "id"}) {
		t.Fatalf("columns %v, want [name id]", names)
	}
	want := [][]any{{"row-0", int64(0)}, {"row-1", int64(1)}, {"row-2", int64(2)}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows %v, want %v", rows, want)
	}
	_, err = f.Source().Discover(context.Background(), connectors.Table{Query: "SELECT id, name FROM " + connectors.QuoteTable(f.Table("series").Name) + " WHERE id < 10"})
	if err != nil {
		t.Fatalf("discover a query: %v", err)
	}
}

// testWatermarkTies pages through a table where 1000 rows share each
// insert time, so page boundaries fall inside runs of equal timestamps;
// every row must come back exactly once.
func testWatermarkTies(t *testing.T, h Harness) {
	f := h.Open(t)
	const n = 5000
	cols := []ColumnDef{{Name: "id", Type: Int64, NotNull: true, PrimaryKey: true}, {Name: "loaded_at", Type: Timestamp, NotNull: true}}
	rows := make([][]any, n)
	for i := range rows {
		id := int64((i * 7919) % n) // a permutation, so ids and times disagree on order
		rows[i] = []any{id, base.Add(time.Duration(i/1000) * time.Second)}
	}
	f.Create(t, "ties", cols, rows)
	seen := make(map[int64]int, n)
	var wm *connectors.Watermark
	var lastTS time.Time
	var lastID int64 = -1
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("paging does not terminate")
		}
		_, page, err := Rows(context.Background(), f.Source(), connectors.ReadRequest{
			Table: f.Table("ties"), After: wm, OrderBy: []string{"loaded_at", "id"}, Limit: 700})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			id, ts := r[0].(int64), r[1].(time.Time)
			if ts.Before(lastTS) || (ts.Equal(lastTS) && id <= lastID) {
				t.Fatalf("order broken at (%v, %d) after (%v, %d)", ts, id, lastTS, lastID)
			}
			lastTS, lastID = ts, id
			seen[id]++
		}
		wm = &connectors.Watermark{Columns: []string{"loaded_at", "id"}, Values: []any{lastTS, lastID}}
	}
	if len(seen) != n {
		t.Fatalf("saw %d distinct rows, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("row %d read %d times", id, c)
		}
	}
}

func testCancel(t *testing.T, h Harness) {
	f := h.Open(t)
	f.CreateSeries(t, "series", 1_000_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batches := 0
	start := time.Now()
	err := f.Source().Read(ctx, connectors.ReadRequest{Table: f.Table("series")}, func(arrow.RecordBatch) error {
		batches++
		if batches == 1 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel returned %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled read took %v", d)
	}
	if batches > 3 {
		t.Errorf("fn called %d times after cancel", batches-1)
	}
	stop := errors.New("stop")
	err = f.Source().Read(context.Background(), connectors.ReadRequest{Table: f.Table("series")}, func(arrow.RecordBatch) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("fn's error not returned: %v", err)
	}
	if h.AfterCancel != nil {
		h.AfterCancel(t, f)
	}
}

func describe(n int64) string { return fmt.Sprintf("%d rows", n) }
