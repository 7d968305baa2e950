package duckstore

import "github.com/tributary-dev/tributary/ingest/store"

// warmer has a set read the home slots of a batch's keys a chunk ahead
// of their adds. Each add otherwise waits for its own cache miss (and, in
// a set of millions of keys, its own TLB miss), one after the other: a
// third of a sync's dedup time in the tiered set, and ~5 % of a
// migration's CPU in the in-memory one (perf). The reads of a chunk are
// independent, so the CPU overlaps their misses, and the adds then find
// the lines in cache.
type warmer struct {
	announced []store.Key
	next      int  // index in announced of the key the next add should be called with
	warmed    int  // the slots of announced[:warmed] were read
	sink      byte // keeps the reads
}

// warmChunk is how many announced keys are read ahead: enough misses to
// overlap, few enough cache lines (two tiers × 64 B × warmChunk) to stay
// in the core's cache until their adds.
const warmChunk = 256

// announce starts a batch: the next adds will be called with keys, in
// order. Adds of other keys, or in another order, are still right.
func (w *warmer) announce(keys []store.Key) {
	w.announced, w.next, w.warmed = append(w.announced[:0], keys...), 0, 0
}

// due is called by add with its key. When k is the announced key due and
// the keys from it on were not read yet, it returns the next warmChunk
// announced keys, whose slots the caller reads; otherwise nothing.
func (w *warmer) due(k store.Key) []store.Key {
	i := w.next
	if i >= len(w.announced) || w.announced[i] != k {
		return nil
	}
	w.next++
	if i < w.warmed {
		return nil
	}
	end := min(i+warmChunk, len(w.announced))
	w.warmed = end
	return w.announced[i:end]
}
