package duckstore

import (
	"encoding/binary"
	"iter"
	"slices"

	"github.com/tributary-dev/tributary/ingest/store"
)

// all yields the set's keys, in no particular order.
func (ks *keySet) all() iter.Seq[store.Key] {
	return func(yield func(store.Key) bool) {
		if ks.shards[0].zero && !yield(store.Key{}) {
			return
		}
		for i := range ks.shards {
			for _, k := range ks.shards[i].slots {
				if k != (store.Key{}) && !yield(k) {
					return
				}
			}
		}
	}
}

// bucketSort writes the keys, sorted, into dst[:0] and returns it: a
// counting sort on their first 16 bits, then a comparison sort of each
// bucket (8 keys on average for 512k uniform keys; structured keys only
// fall back to a plain sort). keys is iterated twice. A plain sort made
// the spill, which stalls a write, about twice as long.
func bucketSort(dst []store.Key, keys iter.Seq[store.Key], counts *[1 << 16]int32) []store.Key {
	clear(counts[:])
	n := 0
	for k := range keys {
		counts[binary.BigEndian.Uint16(k[:2])]++
		n++
	}
	var pos int32
	for i, c := range counts {
		counts[i] = pos
		pos += c
	}
	dst = slices.Grow(dst[:0], n)[:n]
	for k := range keys {
		b := binary.BigEndian.Uint16(k[:2])
		dst[counts[b]] = k
		counts[b]++
	}
	// counts[b] is now where bucket b ends.
	start := 0
	for _, end := range counts {
		if int(end)-start > 1 {
			slices.SortFunc(dst[start:end], compareKeys)
		}
		start = int(end)
	}
	return dst
}

// reset empties the set, keeping its tables.
func (ks *keySet) reset() {
	for i := range ks.shards {
		s := &ks.shards[i]
		clear(s.slots)
		s.n, s.zero = 0, false
	}
	ks.n = 0
}
