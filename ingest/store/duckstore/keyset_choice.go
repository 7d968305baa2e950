package duckstore

import "github.com/tributary-dev/tributary/ingest/store"

// dedupSet is the store's set of committed dedup keys: tieredKeys, 256k
// recent keys in memory and older ones in sorted run files beside the
// database (≈ 1.8 bytes per key in memory). It is the only kind: every
// key in memory took ≈ 27 bytes per stored event (3.1 GB of RSS at 20 M
// events), which a store of years of history cannot afford, and a knob a
// user had to know about to survive growth was the wrong default.
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
