package duckstore

import "github.com/tributary-dev/tributary/ingest/store"

// dedupSet is the store's set of committed dedup keys. Two kinds:
//
//   - memKeys (the default): every key in memory, ~27 bytes each. The
//     fastest for /import; memory grows with the number of events.
//   - tieredKeys (Options.DiskKeys): 256k recent keys in memory, older ones
//     in sorted run files beside the database (~1.8 bytes per key in
//     memory). For a memory budget; its background spills and merges cost
//     /import latency under heavy load (measured: p99 545 ms vs 221 ms at
//     ~300k events/s with 10 M stored), so it is opt-in.
//
// The store's writer lock serialises every call.
type dedupSet interface {
	// add inserts k, reporting whether it was new.
	add(k store.Key) (bool, error)
	remove(k store.Key) error
	// load and finishLoad fill the set at Open, before any other call.
	load(k store.Key) error
	finishLoad() error
	len() int
	// has reports whether k is in the set (an I/O error answers false
	// and is returned by the next add or remove).
	has(k store.Key) bool
	close() error
}

// memKeys adapts the in-memory keySet; it cannot fail.
type memKeys struct {
	ks   *keySet
	warm warmer // a write's keys, read ahead of their adds
}

func newMemKeys(n int) *memKeys { return &memKeys{ks: newKeySet(n)} }

func (m *memKeys) prefilter(keys []store.Key) { m.warm.announce(keys) }

func (m *memKeys) add(k store.Key) (bool, error) {
	var sink byte
	due := m.warm.due(k)
	for j := range due {
		sink ^= m.ks.peek(&due[j])
	}
	m.warm.sink ^= sink
	return m.ks.add(k), nil
}

func (m *memKeys) remove(k store.Key) error { m.ks.remove(k); return nil }
func (m *memKeys) load(k store.Key) error   { m.ks.add(k); return nil }
func (m *memKeys) finishLoad() error        { return nil }
func (m *memKeys) len() int                 { return m.ks.len() }
func (m *memKeys) has(k store.Key) bool     { return m.ks.has(k) }
func (m *memKeys) close() error             { return nil }
