package postgres

import (
	"context"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// BenchmarkReadVsCopy reads a table of mixed column types into Arrow
// batches and, in the same iteration, copies the same rows with binary
// COPY into io.Discard: the server's fastest way out and no decoding at
// all. The ratio of the two rates is the figure to quote; the target is
// at least 0.8. TRIBUTARY_BENCH_ROWS sets the table size (1.5 M).
//
//	go test -tags=duckdb_arrow -run '^$' -bench ReadVsCopy -benchtime 3x ./connectors/postgres/
func BenchmarkReadVsCopy(b *testing.B) {
	n := int64(1_500_000)
	if v, err := strconv.ParseInt(os.Getenv("TRIBUTARY_BENCH_ROWS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	db := newDB(b)
	src := db.open(b)
	db.exec(b, `CREATE UNLOGGED TABLE bench AS SELECT
		i AS id,
		TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL '1 second' AS at,
		'user-' || (i % 100000) AS distinct_id,
		(ARRAY['Signed up', 'Purchase', 'Page view'])[1 + i % 3] AS event,
		i * 0.25::float8 AS amount,
		(i % 1000)::int AS quantity,
		i % 2 = 0 AS flag,
		((i % 100000) / 100.0)::numeric(12,2) AS price,
		jsonb_build_object('plan', 'pro', 'seq', i) AS props,
		md5(i::text)::uuid AS insert_id,
		DATE '2026-01-01' + (i % 365)::int AS day
		FROM generate_series(1, $1::bigint) AS g(i)`, n)
	db.exec(b, "VACUUM ANALYZE bench")
	ctx := context.Background()
	const copySQL = "COPY (SELECT * FROM bench) TO STDOUT (FORMAT binary)"
	req := connectors.ReadRequest{Table: connectors.Table{Name: "bench"}}
	read := func() int64 {
		var rows int64
		err := src.Read(ctx, req, func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return rows
	}
	copyRows := func() {
		if _, err := db.conn.PgConn().CopyTo(ctx, io.Discard, copySQL); err != nil {
			b.Fatal(err)
		}
	}
	copyRows() // warm the page cache for both
	if got := read(); got != n {
		b.Fatalf("read %d rows, want %d", got, n)
	}

	// A sub-benchmark, so the table is built once rather than once per
	// b.N the framework tries.
	b.Run("mixed", func(b *testing.B) {
		var copyTime, readTime time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			copyRows()
			copyTime += time.Since(start)
			start = time.Now()
			read()
			readTime += time.Since(start)
		}
		total := float64(n) * float64(b.N)
		readRate, copyRate := total/readTime.Seconds(), total/copyTime.Seconds()
		b.ReportMetric(readRate, "rows/s")
		b.ReportMetric(copyRate, "copy-rows/s")
		b.ReportMetric(readRate/copyRate, "ratio")
	})
}
