package duckstore

import (
	"slices"
	"testing"
)

// TestBloomFalsePositives: no false negatives, and the false-positive rate
// the filter's size was chosen for (each one costs a lookup a pread).
func TestBloomFalsePositives(t *testing.T) {
	const n = 200_000
	b := newBloom(n)
	for _, k := range randomKeys(n, 31) {
		p := newProbe(k)
		b.add(&p)
	}
	for i, k := range randomKeys(n, 31) {
		if p := newProbe(k); !b.mayContain(&p) {
			t.Fatalf("key %d added but the filter says absent", i)
		}
	}
	fp := 0
	absent := randomKeys(n, 32)
	for _, k := range absent {
		if p := newProbe(k); b.mayContain(&p) {
			fp++
		}
	}
	rate := float64(fp) / float64(len(absent))
	t.Logf("false positives: %d of %d (%.3f%%), %.2f bytes per key", fp, len(absent), 100*rate, float64(b.bytes())/n)
	if rate > 0.005 {
		t.Errorf("false-positive rate %.3f%%, want at most 0.5%%", 100*rate)
	}
}

// TestBloomBlocksFollowKeyOrder: keys added in order (a spill, a merge)
// set their filter's blocks front to back, which is what keeps building a
// large run's filter from missing the cache at every key.
func TestBloomBlocksFollowKeyOrder(t *testing.T) {
	keys := randomKeys(50_000, 33)
	slices.SortFunc(keys, compareKeys)
	b := newBloom(len(keys))
	last := -1
	for i, k := range keys {
		p := newProbe(k)
		idx := b.blockIndex(&p)
		if idx < last {
			t.Fatalf("key %d (in order) maps to block %d, after block %d", i, idx, last)
		}
		last = idx
	}
	if last < len(b.blocks)/2 {
		t.Fatalf("%d ordered keys used blocks up to %d of %d: not spread", len(keys), last, len(b.blocks))
	}
}
