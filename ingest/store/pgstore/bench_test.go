package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// BenchmarkWrite measures one 2000-event transaction (COPY into staging,
// deduplicating insert, durable COMMIT) per op into an empty schema, as
// duckstore's BenchmarkWrite does for the embedded store.
func BenchmarkWrite(b *testing.B) {
	dsn, schema := testSchema(b)
	s, err := Open(context.Background(), dsn, Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
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
}
