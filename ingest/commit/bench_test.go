package commit

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// BenchmarkCommit compares 8 concurrent request handlers writing small
// batches straight to the store (one transaction and fsync each) with the
// same handlers going through a Committer. One op is one request.
func BenchmarkCommit(b *testing.B) {
	for _, size := range []int{10, 100} {
		for _, mode := range []string{"direct", "grouped"} {
			b.Run(mode+"/batch="+strconv.Itoa(size), func(b *testing.B) { benchCommit(b, mode == "grouped", size) })
		}
	}
}

func benchCommit(b *testing.B, grouped bool, size int) {
	const handlers = 8
	st, err := duckstore.Open(context.Background(), filepath.Join(b.TempDir(), "b.duckdb"), duckstore.Options{MemoryLimit: "2GB"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	rec := &recorder{Store: st}
	c := New(rec, Options{})
	defer c.Close()
	batches := make([]store.Batch, b.N)
	for i := range batches {
		batches[i] = store.Batch{Project: 1, Events: storetest.GenEvents(1, size, int64(i*size))}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range handlers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				var res store.WriteResult
				var err error
				if grouped {
					res, err = c.Commit(context.Background(), batches[i])
				} else {
					res, err = rec.Write(context.Background(), batches[i:i+1])
				}
				if err != nil || res.Inserted != size {
					b.Errorf("request %d: %+v, %v", i, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*size)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(len(rec.writes()))/float64(b.N), "txns/op")
}
