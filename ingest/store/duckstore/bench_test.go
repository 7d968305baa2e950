package duckstore

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// benchOptions are what a 2-core production box would run with.
var benchOptions = Options{MemoryLimit: "2GB"}

// fill appends n events in batches of 50k, offset so they never collide
// with the benchmark's own events.
func fill(tb testing.TB, s *Store, n int) {
	tb.Helper()
	const per = 50_000
	for start := 0; start < n; start += per {
		evs := storetest.GenEvents(1, min(per, n-start), -1_000_000_000-int64(start))
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchWrite(b *testing.B, preload int) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.duckdb"), benchOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s, preload)
	const batch = 2000
	// Pre-build every batch so event construction stays out of the timing.
	batches := make([][]store.Event, b.N)
	for i := range batches {
		batches[i] = storetest.GenEvents(1, batch, int64(i)*batch)
	}
	b.SetBytes(int64(batch * len(batches[0][0].Props)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: batches[i]}})
		if err != nil {
			b.Fatal(err)
		}
		if res.Inserted != batch {
			b.Fatalf("inserted %d, want %d", res.Inserted, batch)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "events/s")
	b.StopTimer() // Close checkpoints the WAL; that is not a write
}

// BenchmarkWrite measures one 2000-event transaction (with its WAL fsync)
// per op into an empty store.
func BenchmarkWrite(b *testing.B) { benchWrite(b, 0) }

// BenchmarkWriteAt1M is the same with 1M events already stored (and their
// keys in the dedup set).
func BenchmarkWriteAt1M(b *testing.B) { benchWrite(b, 1_000_000) }

// BenchmarkKeyLoad measures Open on a file holding many dedupable events
// (1M by default; TRIBUTARY_KEYLOAD=10000000 for the figure in docs/benchmarks.md).
func BenchmarkKeyLoad(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("TRIBUTARY_KEYLOAD"))
	if n <= 0 {
		n = 1_000_000
	}
	path := filepath.Join(b.TempDir(), "keys.duckdb")
	s, err := Open(context.Background(), path, benchOptions)
	if err != nil {
		b.Fatal(err)
	}
	// Generated in SQL: going through Write would take minutes and measure
	// nothing new. md5 gives uniformly spread keys like DedupKey's SHA-256
	// (DuckDB's hash() does not: its top bits cluster on sequential input).
	_, err = s.db.Exec(`INSERT INTO events SELECT 1, 'page_view', 'user-' || (i % 1000), i, 'ins-' || i,
		'{"i":' || i || ',"pad":"' || repeat('x', 250) || '"}', i, i, (md5_number_upper(i::VARCHAR)::HUGEINT - 9223372036854775808)::BIGINT,
			(md5_number_lower(i::VARCHAR)::HUGEINT - 9223372036854775808)::BIGINT, NULL
		FROM range(?) t(i)`, n)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		s, err = Open(context.Background(), path, benchOptions)
		if err != nil {
			b.Fatal(err)
		}
		if s.keys.len() != n {
			b.Fatalf("loaded %d keys, want %d", s.keys.len(), n)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkScan reads a 1M-event range: one op is one full scan. The first
// 20480 rows come from a direct query, the rest through the temp table.
func BenchmarkScan(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "scan.duckdb"), benchOptions)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1_000_000
	_, err = s.db.Exec(`INSERT INTO events SELECT 1, 'page_view', 'user-' || (i % 1000), (i * 7919) % 100000000, NULL,
		'{"i":' || i || ',"pad":"' || repeat('x', 250) || '"}', i, i, NULL, NULL, NULL FROM range(?) t(i)`, n)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		got := 0
		err := s.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 40}, func(*store.Event) error {
			got++
			return nil
		})
		if err != nil || got != n {
			b.Fatalf("scanned %d, err %v", got, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "events/s")
}
