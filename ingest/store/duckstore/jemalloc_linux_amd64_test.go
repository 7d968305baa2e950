//go:build linux && amd64

package duckstore

import (
	"path/filepath"
	"testing"
)

// A store opened with ReturnFreedMemory leaves DuckDB's allocator
// returning freed pages after freedDecayMs, in the arenas it uses and
// those made later.
func TestReturnFreedMemory(t *testing.T) {
	opt := testOptions
	opt.ReturnFreedMemory = true
	s := openWith(t, filepath.Join(t.TempDir(), "x.duckdb"), opt)
	defer s.Close()
	writeAndCount(t, s, 1000, "j")
	for _, name := range []string{"arenas.dirty_decay_ms", "arenas.muzzy_decay_ms", "arena.0.dirty_decay_ms", "arena.0.muzzy_decay_ms"} {
		v, err := decayMs(name)
		if err != nil || v != freedDecayMs {
			t.Fatalf("%s = %d (%v), want %d", name, v, err, freedDecayMs)
		}
	}
}
