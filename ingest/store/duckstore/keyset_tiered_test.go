package duckstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

func newTestTiered(t testing.TB, cfg keysConfig) *tieredKeys {
	t.Helper()
	tk, err := newTieredKeys(filepath.Join(t.TempDir(), "x.keys"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tk.close(); err != nil {
			t.Error(err)
		}
	})
	return tk
}

// waitMerge swaps in the spill and then the merge in progress, if any.
func (t *tieredKeys) waitMerge() error {
	if err := t.waitSpill(); err != nil {
		return err
	}
	if t.merge == nil {
		return nil
	}
	return t.finishMerge(<-t.merge.done)
}

// checkAgainst compares the set with the model over the whole pool.
func checkAgainst(t *testing.T, tk *tieredKeys, model map[store.Key]bool, pool []store.Key, step int) {
	t.Helper()
	for i, k := range pool {
		got, err := tk.contains(k)
		if err != nil {
			t.Fatalf("step %d: contains: %v", step, err)
		}
		if got != model[k] {
			t.Fatalf("step %d: pool key %d: has %v, want %v", step, i, got, model[k])
		}
	}
	if tk.len() != len(model) {
		t.Fatalf("step %d: len %d, want %d", step, tk.len(), len(model))
	}
}

// TestTieredKeysModel runs random add/has/remove sequences against a map,
// with caps small enough to cross many spills, merges (background and
// waited for) and tombstone collections; some runs start from a bulk load.
func TestTieredKeysModel(t *testing.T) {
	cfgs := []keysConfig{
		{recentCap: 64, maxRuns: 3, maxTombs: 20},
		{recentCap: 100, maxRuns: 8, maxTombs: 1000},
		{recentCap: 7, maxRuns: 2, maxTombs: 3},
	}
	for ci, cfg := range cfgs {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("cfg%d/seed%d", ci, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, uint64(ci)))
				pool := randomKeys(3000, seed+100)
				pool[0] = store.Key{} // the zero key is a key like any other
				tk := newTestTiered(t, cfg)
				model := map[store.Key]bool{}
				if seed%2 == 1 {
					for range 2000 { // with repeats
						k := pool[r.IntN(len(pool))]
						if err := tk.load(k); err != nil {
							t.Fatal(err)
						}
						model[k] = true
					}
					if err := tk.finishLoad(); err != nil {
						t.Fatal(err)
					}
					checkAgainst(t, tk, model, pool, -1)
				}
				for step := range 30_000 {
					k := pool[r.IntN(len(pool))]
					switch op := r.IntN(100); {
					case op < 55:
						got, err := tk.add(k)
						if err != nil {
							t.Fatal(err)
						}
						if got == model[k] {
							t.Fatalf("step %d: add reported new=%v, model has %v", step, got, model[k])
						}
						model[k] = true
					case op < 80:
						got, err := tk.contains(k)
						if err != nil {
							t.Fatal(err)
						}
						if got != model[k] {
							t.Fatalf("step %d: has %v, want %v", step, got, model[k])
						}
					case op < 99:
						if err := tk.remove(k); err != nil {
							t.Fatal(err)
						}
						delete(model, k)
					default:
						if err := tk.waitMerge(); err != nil {
							t.Fatal(err)
						}
					}
					if step%5000 == 4999 {
						checkAgainst(t, tk, model, pool, step)
					}
				}
				if err := tk.waitMerge(); err != nil {
					t.Fatal(err)
				}
				checkAgainst(t, tk, model, pool, -2)
				if len(tk.runs) > 2*cfg.maxRuns+1 {
					t.Fatalf("%d runs left", len(tk.runs))
				}
			})
		}
	}
}

// TestTieredKeysManyKeys: far more keys than the recent tier, all added,
// then checked present, absent keys absent, and a slice of them removed.
func TestTieredKeysManyKeys(t *testing.T) {
	tk := newTestTiered(t, keysConfig{recentCap: 1000, maxRuns: 4, maxTombs: 500})
	keys := randomKeys(50_000, 7)
	for i, k := range keys {
		if ok, err := tk.add(k); !ok || err != nil {
			t.Fatalf("key %d: add %v, %v", i, ok, err)
		}
	}
	for i, k := range keys {
		if ok, err := tk.add(k); ok || err != nil {
			t.Fatalf("key %d added twice (%v)", i, err)
		}
	}
	for i, k := range randomKeys(50_000, 8) {
		if tk.has(k) {
			t.Fatalf("absent key %d found", i)
		}
	}
	for _, k := range keys[:20_000] {
		if err := tk.remove(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := tk.waitMerge(); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if tk.has(k) != (i >= 20_000) {
			t.Fatalf("key %d: has %v", i, !(i >= 20_000))
		}
	}
	if tk.len() != 30_000 {
		t.Fatalf("len %d", tk.len())
	}
	if len(tk.tomb) > 2*500 {
		t.Fatalf("%d tombstones left", len(tk.tomb))
	}
}

// TestTieredKeysIOError: a run that cannot be read makes add fail rather
// than answer "new".
func TestTieredKeysIOError(t *testing.T) {
	tk := newTestTiered(t, keysConfig{recentCap: 10, maxRuns: 100, maxTombs: 100})
	keys := randomKeys(11, 9)
	for _, k := range keys {
		if _, err := tk.add(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := tk.waitSpill(); err != nil {
		t.Fatal(err)
	}
	if len(tk.runs) != 1 {
		t.Fatalf("%d runs", len(tk.runs))
	}
	f := tk.runs[0].f
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := tk.add(keys[0]); err == nil || ok {
		t.Fatalf("add over an unreadable run: %v, %v", ok, err)
	}
	if err := tk.remove(keys[0]); err == nil {
		t.Fatal("remove over an unreadable run succeeded")
	}
	tk.runs[0].f, _ = os.Open(tk.runs[0].path) // for close
}

// TestReopenRebuildsKeys: after a crash (runs left without a manifest)
// Open rebuilds the set from the events table, spilling runs when it is
// larger than the recent tier, and dedups against it.
func TestReopenRebuildsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	opt := testOptions
	s := openWith(t, path, opt)
	ctx := context.Background()
	evs := storetest.GenEvents(1, 200, 0)
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	n := defaultKeysConfig().recentCap + 1000 // one run and some left over
	_, err := s.db.Exec(`INSERT INTO events SELECT 1, 'x', 'u', i, 'ins-' || i, '{}', i, i,
		(md5_number_upper(i::VARCHAR)::HUGEINT - 9223372036854775808)::BIGINT,
		(md5_number_lower(i::VARCHAR)::HUGEINT - 9223372036854775808)::BIGINT, NULL
		FROM range(?) t(i)`, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The rows inserted above bypassed the set, which Close kept: a crash
	// leaves runs without a manifest.
	if err := os.Remove(filepath.Join(path+".keys", keysManifestName)); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(path+".keys", "run-99999999")
	if err := os.WriteFile(stale, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openWith(t, path, opt)
	defer s.Close()
	if got := s.keys.len(); got != n+len(evs) {
		t.Fatalf("reopened set holds %d keys, want %d", got, n+len(evs))
	}
	if tk := s.keys.(*tieredKeys); len(tk.runs) != 1 {
		t.Fatalf("%d runs after load, want 1", len(tk.runs))
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale run survived Open: %v", err)
	}
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: append(evs[:10:10], storetest.GenEvents(1, 5, 1e9)...)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicates != 10 || res.Inserted != 5 {
		t.Fatalf("after reopen: %d duplicates, %d inserted", res.Duplicates, res.Inserted)
	}
}

// benchTiered builds a set of n keys as Open does (bulk load into one run).
func benchTiered(b *testing.B, n int) (*tieredKeys, []store.Key) {
	tk := newTestTiered(b, defaultKeysConfig())
	keys := randomKeys(n, 11)
	for _, k := range keys {
		if err := tk.load(k); err != nil {
			b.Fatal(err)
		}
	}
	if err := tk.finishLoad(); err != nil {
		b.Fatal(err)
	}
	return tk, keys
}

func reportMem(b *testing.B, tk *tieredKeys) {
	fixed, growing := tk.memBytes()
	b.ReportMetric(float64(growing)/float64(tk.len()), "B/key")
	b.ReportMetric(float64(fixed)/(1<<20), "fixedMB")
}

// BenchmarkTieredKeys: adds of new keys (spills and merges included) and
// lookups of present and absent keys, at 1M and 5M keys, against the
// all-in-memory keySet. B/key is the memory that grows with the keys
// (filters, indexes, tombstones), beyond fixedMB; heapB/key is the live
// heap after building the set, over its keys.
func BenchmarkTieredKeys(b *testing.B) {
	for _, n := range []int{1_000_000, 5_000_000} {
		b.Run(fmt.Sprintf("n=%dM/tiered", n/1_000_000), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			tk, keys := benchTiered(b, n)
			runtime.GC()
			runtime.ReadMemStats(&after)
			// The live heap of the loaded set, less the keys slice.
			heap := float64(after.HeapAlloc-before.HeapAlloc) - float64(n*keyBytes)
			fresh := randomKeys(4_000_000, 12)
			next := 0 // the framework calls the function more than once
			b.Run("add-new", func(b *testing.B) {
				var stall time.Duration // the longest add: a spill, a swap
				for range b.N {
					start := time.Now()
					if ok, err := tk.add(fresh[next%len(fresh)]); err != nil || (!ok && next < len(fresh)) {
						b.Fatal("add failed", err)
					}
					stall = max(stall, time.Since(start))
					next++
				}
				reportMem(b, tk)
				b.ReportMetric(float64(stall.Microseconds())/1000, "max-ms")
			})
			b.Run("has-present", func(b *testing.B) {
				for i := range b.N {
					if ok, err := tk.contains(keys[i%len(keys)]); !ok || err != nil {
						b.Fatal("missing", err)
					}
				}
				b.ReportMetric(heap/(1<<20), "loadHeapMB")
			})
			absent := randomKeys(1_000_000, 13)
			b.Run("has-absent", func(b *testing.B) {
				for i := range b.N {
					if ok, err := tk.contains(absent[i%len(absent)]); ok || err != nil {
						b.Fatal("found", err)
					}
				}
				reportMem(b, tk)
			})
		})
		b.Run(fmt.Sprintf("n=%dM/keySet", n/1_000_000), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			keys := randomKeys(n, 11)
			ks := newKeySet(n)
			for _, k := range keys {
				ks.add(k)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := float64(after.HeapAlloc-before.HeapAlloc) - float64(n*keyBytes) // minus the keys slice
			fresh := randomKeys(4_000_000, 12)
			b.Run("add-new", func(b *testing.B) {
				for i := range b.N {
					ks.add(fresh[i%len(fresh)])
				}
				b.ReportMetric(heap/float64(n), "B/key")
			})
			b.Run("has-present", func(b *testing.B) {
				for i := range b.N {
					if !ks.has(keys[i%len(keys)]) {
						b.Fatal("missing")
					}
				}
				b.ReportMetric(heap/(1<<20), "loadHeapMB")
			})
			absent := randomKeys(1_000_000, 13)
			b.Run("has-absent", func(b *testing.B) {
				for i := range b.N {
					if ks.has(absent[i%len(absent)]) {
						b.Fatal("found")
					}
				}
			})
			runtime.KeepAlive(keys)
		})
	}
}
