package duckstore

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// TestTieredKeysPrefilter: adds announced by prefilter answer exactly as
// unannounced ones, against a map, over batches that repeat keys inside
// themselves, hold keys already in runs, skip an announced key (the
// hints then go unused), remove keys between batches and cross spills and
// merges mid-batch (the runs then differ from the hints'). Most adds must
// take their hint, or the test proves nothing about the hinted path.
func TestTieredKeysPrefilter(t *testing.T) {
	for ci, cfg := range []keysConfig{
		{recentCap: 64, maxRuns: 3, maxTombs: 20},
		{recentCap: 500, maxRuns: 8, maxTombs: 1000},
	} {
		t.Run(fmt.Sprintf("cfg%d", ci), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(ci), 9))
			pool := randomKeys(20_000, uint64(ci)+40)
			tk := newTestTiered(t, cfg)
			model := map[store.Key]bool{}
			hinted, warmed, adds := 0, 0, 0
			for step := range 400 {
				batch := make([]store.Key, 1+r.IntN(200))
				for i := range batch {
					batch[i] = pool[r.IntN(len(pool))]
				}
				tk.prefilter(batch)
				skip := -1
				if step%7 == 3 {
					skip = r.IntN(len(batch))
				}
				for i, k := range batch {
					if i == skip {
						continue
					}
					before, warmedBefore := tk.hints.next, tk.hints.warm.next
					got, err := tk.add(k)
					if err != nil {
						t.Fatal(err)
					}
					if tk.hints.next > before {
						hinted++
					}
					if tk.hints.warm.next > warmedBefore {
						warmed++
					}
					adds++
					if got == model[k] {
						t.Fatalf("step %d key %d: add reported new=%v, model has %v", step, i, got, model[k])
					}
					model[k] = true
				}
				for range r.IntN(5) {
					k := pool[r.IntN(len(pool))]
					if err := tk.remove(k); err != nil {
						t.Fatal(err)
					}
					delete(model, k)
				}
				if step%50 == 49 {
					checkAgainst(t, tk, model, pool, step)
				}
			}
			if err := tk.waitMerge(); err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, tk, model, pool, -1)
			t.Logf("%d of %d adds took a hint, %d came in the announced order (warm)", hinted, adds, warmed)
			if hinted < adds/2 || warmed < adds/2 {
				t.Fatalf("only %d of %d adds took a hint, %d came in the announced order (warm)", hinted, adds, warmed)
			}
		})
	}
}

// BenchmarkTieredAddBatches: a sync's write pattern, 2M new keys added to
// an empty set in batches of 8192 (so runs pile up as they do in a sync),
// each key added alone or the batch announced first (prefilter).
func BenchmarkTieredAddBatches(b *testing.B) {
	const n, batch = 2_000_000, 8192
	keys := randomKeys(n, 21)
	for _, announce := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefilter=%v", announce), func(b *testing.B) {
			for b.Loop() {
				tk := newTestTiered(b, defaultKeysConfig())
				for i := 0; i < n; i += batch {
					part := keys[i:min(i+batch, n)]
					if announce {
						tk.prefilter(part)
					}
					for _, k := range part {
						if ok, err := tk.add(k); !ok || err != nil {
							b.Fatal("add failed", err)
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}
