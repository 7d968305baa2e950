package sourcetest

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/connectors"
)

// testBoundedMemory streams a multi-million-row table and checks that the
// Go heap peak over the whole stream stays within a fixed margin of its
// peak over the first tenth: a source that buffers the result grows with
// the table, a streaming one does not. It also checks every row arrived.
func testBoundedMemory(t *testing.T, h Harness) {
	n := h.StreamRows
	if n == 0 {
		n = 3_000_000
	}
	if testing.Short() {
		n /= 10
	}
	f := h.Open(t)
	f.CreateSeries(t, "series", n)
	runtime.GC()

	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	start := heap()
	var rows, idSum, earlyPeak, peak int64
	err := f.Source().Read(context.Background(), connectors.ReadRequest{Table: f.Table("series")}, func(rec arrow.RecordBatch) error {
		ids, ok := rec.Column(0).(*array.Int64)
		if !ok {
			t.Fatalf("id column is %s, want int64", rec.Column(0).DataType())
		}
		for _, v := range ids.Int64Values() {
			idSum += v
		}
		rows += rec.NumRows()
		hp := heap()
		peak = max(peak, hp)
		if rows <= n/10 {
			earlyPeak = peak
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows != n || idSum != n*(n-1)/2 {
		t.Fatalf("streamed %d rows (id sum %d), want %s (id sum %d)", rows, idSum, describe(n), n*(n-1)/2)
	}
	const margin = 48 << 20
	t.Logf("%s: heap at start %d MB, peak in first tenth %d MB, peak overall %d MB",
		describe(n), start>>20, earlyPeak>>20, peak>>20)
	if peak > earlyPeak+margin {
		t.Fatalf("heap grew with the table: peak %d MB vs %d MB in the first tenth", peak>>20, earlyPeak>>20)
	}
}
