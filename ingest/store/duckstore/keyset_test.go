package duckstore

import (
	"math/rand/v2"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func randomKeys(n int, seed uint64) []store.Key {
	r := rand.New(rand.NewPCG(seed, seed))
	keys := make([]store.Key, n)
	for i := range keys {
		keys[i] = joinKey(int64(r.Uint64()), int64(r.Uint64()))
	}
	return keys
}

func TestKeySet(t *testing.T) {
	for _, sizeHint := range []int{0, 1000, 200_000} {
		ks := newKeySet(sizeHint)
		keys := randomKeys(100_000, 1) // with hint 0 every shard grows many times
		for i, k := range keys {
			if !ks.add(k) {
				t.Fatalf("hint %d: key %d reported as present", sizeHint, i)
			}
		}
		for i, k := range keys {
			if !ks.has(k) {
				t.Fatalf("hint %d: key %d lost", sizeHint, i)
			}
			if ks.add(k) {
				t.Fatalf("hint %d: key %d added twice", sizeHint, i)
			}
		}
		for i, k := range randomKeys(100_000, 2) {
			if ks.has(k) {
				t.Fatalf("hint %d: absent key %d found", sizeHint, i)
			}
		}
		if ks.len() != len(keys) {
			t.Fatalf("hint %d: len %d, want %d", sizeHint, ks.len(), len(keys))
		}
	}
}

func TestKeySetEdgeKeys(t *testing.T) {
	ks := newKeySet(0)
	var zero, ones store.Key
	for i := range ones {
		ones[i] = 0xff
	}
	// Keys sharing a home slot and keys at the end of a shard (wrap-around).
	near := []store.Key{ones, joinKey(-1, 0), joinKey(-1, 1), joinKey(-1, 2)}
	if ks.has(zero) || !ks.add(zero) || !ks.has(zero) || ks.add(zero) {
		t.Fatal("zero key mishandled")
	}
	for _, k := range near {
		if !ks.add(k) {
			t.Fatalf("%x reported present", k)
		}
	}
	for _, k := range near {
		if !ks.has(k) {
			t.Fatalf("%x lost", k)
		}
	}
	if ks.len() != 1+len(near) {
		t.Fatalf("len %d", ks.len())
	}
}

// TestKeySetStructuredKeys: keys that are not uniformly random (here
// counting integers) must not pile up into one probe cluster.
func TestKeySetStructuredKeys(t *testing.T) {
	const n = 1_000_000
	ks := newKeySet(0)
	for i := range n {
		ks.add(joinKey(int64(i), int64(i)))
		ks.add(joinKey(0, int64(i)))
	}
	for i := range n {
		if !ks.has(joinKey(int64(i), int64(i))) || !ks.has(joinKey(0, int64(i))) {
			t.Fatalf("key %d lost", i)
		}
	}
	if ks.len() != 2*n-1 { // (0,0) appears in both series
		t.Fatalf("len %d, want %d", ks.len(), 2*n-1)
	}
	// Clustered keys would make long runs of occupied slots (minutes of
	// probing) and lopsided shards; spread out, neither happens.
	avg := ks.len() / len(ks.shards)
	longest := 0
	for i := range ks.shards {
		sh := &ks.shards[i]
		if sh.n > 2*avg {
			t.Errorf("shard %d holds %d keys, the average is %d", i, sh.n, avg)
		}
		longest = max(longest, longestRun(sh.slots))
	}
	t.Logf("longest run of occupied slots: %d", longest)
	if longest > 1000 {
		t.Fatalf("a run of %d occupied slots: keys cluster", longest)
	}
}

// longestRun is the longest stretch of occupied slots (wrapping), which
// bounds the probes of a lookup.
func longestRun(slots []store.Key) int {
	best, run := 0, 0
	for i := range 2 * len(slots) {
		if slots[i%len(slots)] == (store.Key{}) {
			run = 0
			continue
		}
		run++
		best = max(best, min(run, len(slots)))
	}
	return best
}

func BenchmarkKeySetHas(b *testing.B) {
	keys := randomKeys(1_000_000, 3)
	ks := newKeySet(len(keys))
	m := make(map[store.Key]struct{}, len(keys))
	for _, k := range keys {
		ks.add(k)
		m[k] = struct{}{}
	}
	b.Run("keySet", func(b *testing.B) {
		for i := range b.N {
			if !ks.has(keys[i%len(keys)]) {
				b.Fatal("missing")
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for i := range b.N {
			if _, ok := m[keys[i%len(keys)]]; !ok {
				b.Fatal("missing")
			}
		}
	})
}

// TestKeySetRemove removes keys in random order from crowded shards (long
// probe clusters, wrap-around) and checks every remaining key is found.
func TestKeySetRemove(t *testing.T) {
	for _, hint := range []int{0, 60_000} {
		ks := newKeySet(hint)
		keys := randomKeys(40_000, 3)
		for _, k := range keys {
			ks.add(k)
		}
		r := rand.New(rand.NewPCG(4, 4))
		r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		gone, kept := keys[:25_000], keys[25_000:]
		for _, k := range gone {
			ks.remove(k)
		}
		ks.remove(randomKeys(1, 99)[0]) // absent: no effect
		for i, k := range kept {
			if !ks.has(k) {
				t.Fatalf("hint %d: kept key %d lost", hint, i)
			}
		}
		for i, k := range gone {
			if ks.has(k) {
				t.Fatalf("hint %d: removed key %d still present", hint, i)
			}
		}
		if ks.len() != len(kept) {
			t.Fatalf("hint %d: len %d, want %d", hint, ks.len(), len(kept))
		}
		for _, k := range gone { // slots freed by removal are reusable
			if !ks.add(k) {
				t.Fatalf("hint %d: re-add failed", hint)
			}
		}
	}
	var zero store.Key
	ks := newKeySet(0)
	ks.add(zero)
	ks.remove(zero)
	if ks.has(zero) || ks.len() != 0 {
		t.Fatal("zero key not removed")
	}
}
