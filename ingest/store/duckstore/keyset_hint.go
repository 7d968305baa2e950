package duckstore

import (
	"slices"

	"github.com/tributary-dev/tributary/ingest/store"
)

// keyPrefilter is implemented by dedup sets that answer a batch of adds
// faster when told the keys first.
type keyPrefilter interface {
	// prefilter announces the keys the next adds will be called with, in
	// order. Adds of other keys, or in another order, are still right.
	prefilter(keys []store.Key)
}

// keyHints are the run filters' answers for the keys of the next adds. A
// new key misses every run's filter, so add's cost was one cache miss per
// run per key, taken one after the other; asked run by run over a whole
// batch, the misses of independent keys overlap in the CPU's memory
// pipeline. The answers are valid for the runs they were taken from: a
// spill or merge swapped in since makes add ask the filters itself.
type keyHints struct {
	probes []probe  // the keys asked about, with their hashes
	masks  []uint64 // bit i: runs[i]'s filter may hold the key
	runs   []*keyRun
	next   int // the key the next add should be called with

	// The recent tier's slots of announced keys are read a chunk ahead of
	// their adds, whether or not there are runs to ask.
	warm warmer
}

// maxHintRuns: a mask has a bit per run. The set keeps about eight.
const maxHintRuns = 64

func (t *tieredKeys) prefilter(keys []store.Key) {
	h := &t.hints
	h.probes, h.next = h.probes[:0], 0
	h.warm.announce(keys)
	if len(t.runs) > 0 && len(t.runs) <= maxHintRuns {
		h.ask(keys, t.runs)
	}
}

// ask takes the filters' answers for keys, run by run.
func (h *keyHints) ask(keys []store.Key, runs []*keyRun) {
	h.runs = append(h.runs[:0], runs...)
	h.probes = slices.Grow(h.probes[:0], len(keys))[:len(keys)]
	h.masks = slices.Grow(h.masks[:0], len(keys))[:len(keys)]
	for j, k := range keys {
		h.probes[j] = newProbe(k)
		h.masks[j] = 0
	}
	for i, r := range runs {
		bit := uint64(1) << i
		for j := range h.probes {
			if r.bloom.mayContain(&h.probes[j]) {
				h.masks[j] |= bit
			}
		}
	}
}

// take returns the hint for k when it is the key announced next and the
// runs are those the hints were taken from.
func (h *keyHints) take(k store.Key, runs []*keyRun) (p probe, mask uint64, ok bool) {
	if h.next >= len(h.probes) || h.probes[h.next].k != k || !slices.Equal(h.runs, runs) {
		return probe{}, 0, false
	}
	p, mask = h.probes[h.next], h.masks[h.next]
	h.next++
	return p, mask, true
}

// warm is called by add with its key: it reads the recent (and frozen)
// tier's home slots of the announced keys due (warmer).
func (t *tieredKeys) warm(k store.Key) {
	w := &t.hints.warm
	var sink byte
	due := w.due(k)
	for j := range due {
		sink ^= t.recent.peek(&due[j])
		if t.frozen != nil {
			sink ^= t.frozen.peek(&due[j])
		}
	}
	w.sink ^= sink
}
