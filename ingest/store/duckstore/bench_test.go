package duckstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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

// TestKeyLoadTime measures Open on a file holding many dedupable events.
// It is opt-in because filling the file takes minutes:
//
//	TRIBUTARY_KEYLOAD=10000000 go test -run TestKeyLoadTime -v -timeout 30m ./ingest/store/duckstore/
func TestKeyLoadTime(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRIBUTARY_KEYLOAD"))
	if n <= 0 {
		t.Skip("set TRIBUTARY_KEYLOAD=<events> to run")
	}
	path := filepath.Join(t.TempDir(), "keys.duckdb")
	s, err := Open(context.Background(), path, benchOptions)
	if err != nil {
		t.Fatal(err)
	}
	// Generated in SQL: going through Write would take minutes and measure
	// nothing new. md5 gives uniformly spread keys like DedupKey's SHA-256
	// (DuckDB's hash() does not: its top bits cluster on sequential input).
	fillStart := time.Now()
	_, err = s.db.Exec(`INSERT INTO events SELECT 1, 'page_view', 'user-' || (i % 1000), i, 'ins-' || i,
		'{"i":' || i || ',"pad":"' || repeat('x', 250) || '"}', i, i, (md5_number_upper(i::VARCHAR)::HUGEINT - 9223372036854775808)::BIGINT,
			(md5_number_lower(i::VARCHAR)::HUGEINT - 9223372036854775808)::BIGINT
		FROM range(?) t(i)`, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("filled %d events in %v", n, time.Since(fillStart))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil {
		t.Logf("file size %d MB", fi.Size()>>20)
	}
	var before, after runtimeMem
	before.read()
	start := time.Now()
	s, err = Open(context.Background(), path, benchOptions)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	after.read()
	defer s.Close()
	if s.keys.len() != n {
		t.Fatalf("loaded %d keys, want %d", s.keys.len(), n)
	}
	t.Logf("Open loaded %d keys in %v (%.1f M keys/s); Go heap +%d MB (%.0f bytes/key)", n, took,
		float64(n)/took.Seconds()/1e6, (after.heap-before.heap)>>20, float64(after.heap-before.heap)/float64(n))
	fmt.Fprintf(os.Stderr, "keyload: %d keys in %v\n", n, took)
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
		'{"i":' || i || ',"pad":"' || repeat('x', 250) || '"}', i, i, NULL, NULL FROM range(?) t(i)`, n)
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

type runtimeMem struct{ heap uint64 }

func (m *runtimeMem) read() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heap = ms.HeapAlloc
}
