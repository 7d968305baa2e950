package duckstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
	"github.com/tributary-dev/tributary/integration/procstat"
)

// pauseLoader stops the loader goroutine (after it drained the log) so a
// benchmark can fill the log and time applyPending alone; resumeLoader
// restarts it so Close works as usual.
func pauseLoader(s *Store) {
	close(s.quit)
	<-s.loaderDone
	s.quit, s.loaderDone = make(chan struct{}), make(chan struct{})
}

func resumeLoader(s *Store) { go s.runLoader() }

// loadgenEvents builds n events shaped like integration/loadgen's (props
// with mixed, poorly compressible values), unlike storetest.GenEvents whose
// zero padding compresses to nothing and flatters DuckDB's checkpoints.
func loadgenEvents(n int, seed uint64) []store.Event {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	names := []string{"Product Viewed", "Added To Cart", "Checkout Started", "Order Completed", "Page View", "Search"}
	browsers := []string{"Chrome", "Safari", "Firefox", "Edge"}
	evs := make([]store.Event, n)
	for i := range evs {
		sku := r.IntN(20_000)
		props := fmt.Sprintf(`{"$browser":%q,"$os":"Mac OS X","$current_url":"https://shop.example.com/p/%d","product_id":"sku-%d","category":"shoes","price":%.2f,"utm_source":"google","mp_lib":"web"}`,
			browsers[r.IntN(len(browsers))], sku, sku, float64(r.IntN(20000))/100)
		evs[i] = storetest.NewEvent(1, names[r.IntN(len(names))], "user-"+strconv.Itoa(r.IntN(500_000)),
			1_700_000_000_000-r.Int64N(6*3600*1000), "lg-"+strconv.FormatUint(seed, 36)+"-"+strconv.Itoa(i), props)
	}
	return evs
}

// BenchmarkLoad times the loader alone: per op, 500k events (20 writes of
// 25k, as the group committer makes them) are logged with the loader
// paused, then applied to DuckDB. TRIBUTARY_LOAD_PRELOAD sets how many
// events the table holds first (default 1M).
func BenchmarkLoad(b *testing.B) {
	preload := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("TRIBUTARY_LOAD_PRELOAD")); err == nil {
		preload = v
	}
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "load.duckdb"), Options{Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const perWrite, writes = 25_000, 20
	for i := 0; i < preload; i += perWrite {
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: loadgenEvents(perWrite, uint64(1e9+i))}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Sync(context.Background()); err != nil {
		b.Fatal(err)
	}
	pauseLoader(s)
	defer resumeLoader(s)
	b.ResetTimer()
	var loadTime, loadCPU time.Duration
	for n := range b.N {
		b.StopTimer()
		for w := range writes {
			evs := loadgenEvents(perWrite, uint64(n*writes+w))
			if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start, cpu0 := time.Now(), procstat.SelfCPU()
		if _, err := s.applyPending(context.Background(), true); err != nil {
			b.Fatal(err)
		}
		loadTime += time.Since(start)
		loadCPU += procstat.SelfCPU() - cpu0
	}
	events := float64(b.N * perWrite * writes)
	b.ReportMetric(events/loadTime.Seconds(), "events/s")
	// CPU per event is the steadier figure on a shared machine: other
	// processes stretch the wall clock but not this process's CPU time.
	b.ReportMetric(float64(loadCPU.Microseconds())/events, "cpu-µs/event")
	if _, err := s.db.Exec("CHECKPOINT"); err == nil {
		if st, err := os.Stat(s.path); err == nil {
			b.ReportMetric(float64(st.Size())/float64(preload+b.N*perWrite*writes), "file-B/event")
		}
	}
}
