package postgres

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// BenchmarkFeedVsRead is the shape of issue 32's Mirror benchmark on the
// source side: a 12-column table, 1 % of its rows updated and 0.1 %
// deleted after the feed started; one iteration streams those changes
// with Changes and reads the whole table with Read. The "ratio" metric is
// the change stream's time over the full read's. TRIBUTARY_BENCH_ROWS sets
// the table size (1 M).
//
//	go test -tags=duckdb_arrow -run '^$' -bench FeedVsRead -benchtime 3x ./connectors/postgres/
func BenchmarkFeedVsRead(b *testing.B) {
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("TRIBUTARY_BENCH_ROWS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	db := newDB(b)
	var level string
	if err := db.conn.QueryRow(context.Background(), "SHOW wal_level").Scan(&level); err != nil || level != "logical" {
		b.Skip("wal_level is not logical: no change feed to measure")
	}
	b.Cleanup(func() {
		_, _ = db.conn.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, db.name)
	})
	src := db.open(b)
	db.exec(b, `CREATE TABLE bench AS SELECT
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
		DATE '2026-01-01' + (i % 365)::int AS day,
		'note ' || i AS note
		FROM generate_series(1, $1::bigint) AS g(i)`, n)
	db.exec(b, "ALTER TABLE bench ADD PRIMARY KEY (id)")
	db.exec(b, "VACUUM ANALYZE bench")
	ctx := context.Background()
	f := connectors.Feed{Name: "tributary_bench_" + db.name[len(db.name)-12:], Table: connectors.Table{Name: "bench"}, Key: []string{"id"}}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })
	db.exec(b, "UPDATE bench SET amount = amount + 1, note = 'changed' WHERE id % 100 = 0")
	db.exec(b, "DELETE FROM bench WHERE id % 1000 = 1")
	want := n/100 + n/1000

	b.Run("1pct", func(b *testing.B) {
		var feedTime, readTime time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			var rows int64
			if _, err := src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
				rows += rec.NumRows()
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			feedTime += time.Since(start)
			if rows != want {
				b.Fatalf("%d changes, want %d", rows, want)
			}
			start = time.Now()
			if err := src.Read(ctx, connectors.ReadRequest{Table: f.Table}, func(arrow.RecordBatch) error { return nil }); err != nil {
				b.Fatal(err)
			}
			readTime += time.Since(start)
		}
		b.ReportMetric(feedTime.Seconds()/float64(b.N), "feed-s")
		b.ReportMetric(readTime.Seconds()/float64(b.N), "read-s")
		b.ReportMetric(feedTime.Seconds()/readTime.Seconds(), "ratio")
	})
}
