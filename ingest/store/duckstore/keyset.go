package duckstore

import (
	"encoding/binary"
	"math/bits"

	"github.com/tributary-dev/tributary/ingest/store"
)

// keySet is the in-memory set of committed dedup keys.
//
// Keys are SHA-256 prefixes, so their bits are already uniform: the top
// byte picks a shard and the next bits the home slot, with no hashing. A
// Go map would cost ~30 bytes and two cache misses per key; here a key is
// 16 bytes in a table kept at most 3/4 full, found with one miss, and Open
// inserts keys in sorted order so loading walks memory sequentially.
// Shards grow independently, so a resize stalls a write for 1/256 of the
// set, not all of it.
type keySet struct {
	shards [256]shard
	n      int
}

type shard struct {
	slots []store.Key // the zero Key marks an empty slot
	shift uint        // 64 - log2(len(slots))
	n     int
	zero  bool // the all-zero key (odds 2^-128) cannot live in slots
}

const minShardSlots = 64

// newKeySet sizes the set for about n keys.
func newKeySet(n int) *keySet {
	ks := &keySet{}
	per := n / len(ks.shards) * 4 / 3
	size := max(minShardSlots, 1<<bits.Len(uint(per)))
	for i := range ks.shards {
		ks.shards[i].alloc(size)
	}
	return ks
}

func (s *shard) alloc(size int) {
	s.slots = make([]store.Key, size)
	s.shift = uint(64 - bits.TrailingZeros(uint(size)))
}

// home returns the shard and the home slot of k.
func (ks *keySet) home(k *store.Key) (*shard, uint64) {
	h := binary.BigEndian.Uint64(k[:8])
	s := &ks.shards[h>>56]
	return s, (h << 8) >> s.shift
}

func (ks *keySet) has(k store.Key) bool {
	if k == (store.Key{}) {
		return ks.shards[0].zero
	}
	s, i := ks.home(&k)
	mask := uint64(len(s.slots) - 1)
	for {
		switch s.slots[i] {
		case k:
			return true
		case store.Key{}:
			return false
		}
		i = (i + 1) & mask
	}
}

// add inserts k, reporting whether it was new.
func (ks *keySet) add(k store.Key) bool {
	if k == (store.Key{}) {
		if ks.shards[0].zero {
			return false
		}
		ks.shards[0].zero = true
		ks.n++
		return true
	}
	s, _ := ks.home(&k)
	if (s.n+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	if !s.insert(k) {
		return false
	}
	s.n++
	ks.n++
	return true
}

func (s *shard) insert(k store.Key) bool {
	h := binary.BigEndian.Uint64(k[:8])
	i := (h << 8) >> s.shift
	mask := uint64(len(s.slots) - 1)
	for {
		switch s.slots[i] {
		case k:
			return false
		case store.Key{}:
			s.slots[i] = k
			return true
		}
		i = (i + 1) & mask
	}
}

func (s *shard) grow() {
	old := s.slots
	s.alloc(len(old) * 2)
	for _, k := range old {
		if k != (store.Key{}) {
			s.insert(k)
		}
	}
}

func (ks *keySet) len() int { return ks.n }
