package bigquery

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// BenchmarkStorageRead reads a 1M-row table (int64, timestamp, string,
// float64) through the Storage Read path: the real gRPC client, Arrow IPC
// decoding and conforming, against bqread in the same process, whose
// DuckDB scan and IPC encoding share the CPU, so the figure is a lower
// bound for the connector's own cost. Run with
// go test -tags=duckdb_arrow -run '^$' -bench StorageRead ./connectors/bigquery/
func BenchmarkStorageRead(b *testing.B) {
	const n = 1_000_000
	for _, streams := range []int{1, 4} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			e := newStubEnv(b)
			e.series(b, "d", "series", n)
			src, err := e.open(b, map[string]string{"max_streams": fmt.Sprint(streams)})
			if err != nil {
				b.Fatal(err)
			}
			req := connectors.ReadRequest{Table: connectors.Table{Name: "series"}}
			var rows int64
			start := time.Now()
			for b.Loop() {
				err := src.Read(context.Background(), req, func(rec arrow.RecordBatch) error {
					rows += rec.NumRows()
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if rows%n != 0 {
				b.Fatalf("read %d rows, not a multiple of %d", rows, n)
			}
			b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
		})
	}
}
