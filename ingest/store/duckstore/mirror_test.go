package duckstore

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// TestMirrorStateWithinSyncMemory keeps a 300k-key Mirror state under
// `tributary sync`'s DuckDB share (24 MB): with a primary-key index
// (an ART, which DuckDB keeps wholly in memory) a 100k-key state failed
// its upsert. It then changes every hundredth key, as a second run does,
// and checks what the lookups and the settle report.
func TestMirrorStateWithinSyncMemory(t *testing.T) {
	const keys, flush = 300_000, 16_384
	ctx := context.Background()
	opt := testOptions
	opt.MemoryLimit, opt.Threads = "24MB", 1
	s := openWith(t, filepath.Join(t.TempDir(), "m.duckdb"), opt)
	defer s.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'i'}, uint64(i)) }
	apply := func(gen int64, from, to int, hash byte) {
		t.Helper()
		var rows []store.MirrorRow
		keys := make([][]byte, 0, to-from)
		for i := from; i < to; i++ {
			keys = append(keys, key(i))
		}
		if err := s.MirrorLookup(ctx, 1, "imp", gen, keys, func(store.MirrorRow) error { return nil }); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			rows = append(rows, store.MirrorRow{Key: k, Hash: []byte{hash}, Ref: make([]byte, 24), Flag: store.MirrorPending})
		}
		if err := s.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: gen, Rows: rows}); err != nil {
			t.Fatalf("apply keys %d-%d: %v", from, to, err)
		}
	}
	for from := 0; from < keys; from += flush {
		apply(1, from, min(from+flush, keys), 1)
	}
	if err := s.MirrorSettle(ctx, 1, "imp", ""); err != nil {
		t.Fatal(err)
	}
	// Every hundredth key changes: one row per changed key, pending.
	var changed [][]byte
	for i := 7; i < keys; i += 100 {
		changed = append(changed, key(i))
	}
	var rows []store.MirrorRow
	for _, k := range changed {
		rows = append(rows, store.MirrorRow{Key: k, Hash: []byte{2}, Flag: store.MirrorPending})
	}
	if err := s.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: 2, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.MirrorCount(ctx, 1, "imp"); err != nil || n != keys {
		t.Fatalf("count = %d, %v; want %d", n, err, keys)
	}
	got := map[string]store.MirrorRow{}
	probe := [][]byte{key(7), key(8), key(keys + 1)}
	if err := s.MirrorLookup(ctx, 1, "imp", 0, probe, func(r store.MirrorRow) error { got[string(r.Key)] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if r := got[string(key(7))]; len(got) != 2 || r.Hash[0] != 2 || r.Flag != store.MirrorPending {
		t.Fatalf("lookup after the change = %+v", got)
	}
	if r := got[string(key(8))]; r.Hash[0] != 1 || r.Flag != store.MirrorSettled {
		t.Fatalf("unchanged key = %+v", r)
	}
	if err := s.MirrorSettle(ctx, 1, "imp", ""); err != nil {
		t.Fatal(err)
	}
	clear(got)
	if err := s.MirrorLookup(ctx, 1, "imp", 0, probe[:1], func(r store.MirrorRow) error { got[string(r.Key)] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if r := got[string(key(7))]; r.Flag != store.MirrorSettled || r.Hash[0] != 2 {
		t.Fatalf("settled change = %+v", r)
	}
}
