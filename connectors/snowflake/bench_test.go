package snowflake

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
)

// BenchmarkRead reads a table of mixed column types from the local
// server through gosnowflake and reports rows/s. The figure includes the
// server's side (DuckDB, Snowflake wire encoding, gzip) on the same
// cores, so it is a floor for the connector, not a Snowflake rate.
// TRIBUTARY_BENCH_ROWS sets the table size (1 M).
//
//	go test -tags=duckdb_arrow -run '^$' -bench Read -benchtime 3x ./connectors/snowflake/
func BenchmarkRead(b *testing.B) {
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("TRIBUTARY_BENCH_ROWS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	srv := newServer(b, sfserver.Config{})
	cols := []sfserver.Column{
		{Name: "ID", Type: "NUMBER(38,0)", NotNull: true, PrimaryKey: true},
		{Name: "AT", Type: "TIMESTAMP_NTZ(9)", NotNull: true},
		{Name: "DISTINCT_ID", Type: "VARCHAR"},
		{Name: "EVENT", Type: "VARCHAR"},
		{Name: "AMOUNT", Type: "FLOAT"},
		{Name: "PRICE", Type: "NUMBER(12,2)"},
		{Name: "FLAG", Type: "BOOLEAN"},
		{Name: "PROPS", Type: "VARIANT"},
	}
	err := srv.CreateTableAs(context.Background(), "bench", cols, `SELECT i,
		TIMESTAMP '2026-01-01 00:00:00' + to_seconds(i), 'user-' || (i % 100000),
		['Signed up', 'Purchase', 'Page view'][1 + i % 3], i * 0.25, (i % 100000) / 100, i % 2 = 0,
		'{"plan":"pro","seq":' || i || '}'
		FROM range(0, `+strconv.FormatInt(n, 10)+`) AS g(i)`)
	if err != nil {
		b.Fatal(err)
	}
	src := openSource(b, srv)
	req := connectors.ReadRequest{Table: connectors.Table{Name: "bench"}}
	read := func() int64 {
		var rows int64
		err := src.Read(context.Background(), req, func(rec arrow.RecordBatch) error {
			rows += rec.NumRows()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return rows
	}
	if got := read(); got != n {
		b.Fatalf("read %d rows, want %d", got, n)
	}
	b.Run("mixed", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			read()
			total += time.Since(start)
		}
		b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "rows/s")
	})
}
