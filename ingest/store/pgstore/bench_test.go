package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// benchWrite measures one transaction of `requests` batches of 2000 events
// per op (the shape group commit gives a Write under load), after preload
// events, into a fresh schema, as duckstore's benchmarks do for the
// embedded store.
func benchWrite(b *testing.B, requests, preload int) {
	dsn, schema := testSchema(b)
	s, err := Open(context.Background(), dsn, Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for start := 0; start < preload; start += 50_000 {
		evs := storetest.GenEvents(1, min(50_000, preload-start), -1_000_000_000-int64(start))
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 2000
	// Pre-build every batch so event construction stays out of the timing.
	writes := make([][]store.Batch, b.N)
	for i := range writes {
		for r := range requests {
			base := int64(i*requests+r) * batch
			writes[i] = append(writes[i], store.Batch{Project: 1, Events: storetest.GenEvents(1, batch, base)})
		}
	}
	b.SetBytes(int64(requests * batch * len(writes[0][0].Events[0].Props)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := s.Write(context.Background(), writes[i])
		if err != nil {
			b.Fatal(err)
		}
		if res.Inserted != requests*batch {
			b.Fatalf("inserted %d, want %d", res.Inserted, requests*batch)
		}
	}
	b.ReportMetric(float64(b.N*requests*batch)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkWrite: one 2000-event request per transaction.
func BenchmarkWrite(b *testing.B) { benchWrite(b, 1, 0) }

// BenchmarkWriteGroup16: 16 requests of 2000 events per transaction.
func BenchmarkWriteGroup16(b *testing.B) { benchWrite(b, 16, 0) }

// BenchmarkWriteAt1M: as BenchmarkWrite with 1M events already stored.
func BenchmarkWriteAt1M(b *testing.B) { benchWrite(b, 1, 1_000_000) }
