package duckstore

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// baseTableMiB is DuckDB's memory of table data it cannot spill, where
// it keeps the version info of deleted rows (mirror_versions.go).
func baseTableMiB(t *testing.T, s *Store) float64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRow(`SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'BASE_TABLE'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return float64(n) / (1 << 20)
}

// TestMirrorVersionsCompact changes, removes and deletes keys over runs
// until the state's dead rows are due for a compaction, and checks that
// every read sees the latest versions before and after it, and that the
// compaction left one row per live key.
func TestMirrorVersionsCompact(t *testing.T) {
	const keys = 1000
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v.duckdb")
	s := openAt(t, path)
	defer func() { s.Close() }()
	key := func(i int) []byte { return binary.BigEndian.AppendUint32([]byte{'k'}, uint32(i)) }
	var all [][]byte
	var first []store.MirrorRow
	for i := range keys {
		all = append(all, key(i))
		first = append(first, store.MirrorRow{Key: key(i), Hash: []byte{0}, Flag: store.MirrorPending})
	}
	apply := func(a store.MirrorApply) {
		t.Helper()
		a.Project, a.Import = 1, "imp"
		if err := s.MirrorApply(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	settle := func() {
		t.Helper()
		if err := s.MirrorSettle(ctx, 1, "imp", ""); err != nil {
			t.Fatal(err)
		}
	}
	apply(store.MirrorApply{Gen: 1, Rows: first})
	settle()
	// want: the hash of each live key; removed and deleted keys are absent.
	want := map[string]byte{}
	for _, k := range all {
		want[string(k)] = 0
	}
	check := func(when string, gen int64) {
		t.Helper()
		got := map[string]store.MirrorRow{}
		if err := s.MirrorLookup(ctx, 1, "imp", 0, all, func(r store.MirrorRow) error {
			if _, dup := got[string(r.Key)]; dup {
				t.Fatalf("%s: key %x read twice", when, r.Key)
			}
			got[string(r.Key)] = r
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: lookup found %d keys, want %d", when, len(got), len(want))
		}
		for k, h := range want {
			if r, ok := got[k]; !ok || r.Hash[0] != h || r.Flag != store.MirrorSettled {
				t.Fatalf("%s: key %x = %+v (found %v), want hash %d settled", when, k, r, ok, h)
			}
		}
		if n, err := s.MirrorCount(ctx, 1, "imp"); err != nil || n != int64(len(want)) {
			t.Fatalf("%s: count %d, %v; want %d", when, n, err, len(want))
		}
		// A run that sees keys 0-99 only finds the other live keys unseen.
		if err := s.MirrorLookup(ctx, 1, "imp", gen, all[:100], func(store.MirrorRow) error { return nil }); err != nil {
			t.Fatal(err)
		}
		unseen := 0
		if err := s.MirrorUnseen(ctx, 1, "imp", gen, func(r store.MirrorRow) error {
			if h, ok := want[string(r.Key)]; !ok || r.Hash[0] != h {
				t.Fatalf("%s: unseen %x hash %v is not a live key's latest version", when, r.Key, r.Hash)
			}
			unseen++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		live := 0
		for _, k := range all[:100] {
			if _, ok := want[string(k)]; ok {
				live++
			}
		}
		if unseen != len(want)-live {
			t.Fatalf("%s: %d unseen, want %d", when, unseen, len(want)-live)
		}
		settle()
	}
	gen := int64(2)
	compacted := false
	for run := 1; run <= 4; run++ {
		// Each run changes ~56 keys, removes 5 (events) and deletes 5
		// (profiles: a tombstone until settled).
		var rows []store.MirrorRow
		var remove [][]byte
		for i := run; i < keys; i += 16 {
			if i >= 100 && i < 200 {
				continue // the keys removed and deleted below
			}
			k := key(i)
			rows = append(rows, store.MirrorRow{Key: k, Hash: []byte{byte(run)}, Flag: store.MirrorPending})
			want[string(k)] = byte(run)
		}
		for i := 100 + run*10; i < 105+run*10; i++ {
			remove = append(remove, key(i))
			delete(want, string(key(i)))
		}
		for i := 105 + run*10; i < 110+run*10; i++ {
			rows = append(rows, store.MirrorRow{Key: key(i), Hash: []byte{0}, Flag: store.MirrorDeleting})
			delete(want, string(key(i)))
		}
		apply(store.MirrorApply{Gen: gen, Rows: rows, Remove: remove})
		gen++
		settle()
		_, dead, err := mirrorMarks(ctx, s.db, 1, "imp")
		if err != nil {
			t.Fatal(err)
		}
		if dead == 0 {
			compacted = true
			var n int64
			if err := s.db.QueryRow(`SELECT count(*) FROM mirror_keys WHERE project = 1 AND import = 'imp'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != int64(len(want)) {
				t.Fatalf("run %d: compacted state has %d rows, want one per live key, %d", run, n, len(want))
			}
		}
		check("run "+string(rune('0'+run)), gen)
		gen++
	}
	if !compacted {
		t.Fatal("no compaction in 4 runs that each made ~8 % of the state dead")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	check("reopened", gen)
}

// TestMirrorReplacedGiven: an apply whose caller says how many keys it
// replaces (store.MirrorApply.Replaced) records the same dead rows as
// one the store counts itself, for new versions and for removals.
func TestMirrorReplacedGiven(t *testing.T) {
	ctx := context.Background()
	key := func(i int) []byte { return binary.BigEndian.AppendUint32([]byte{'r'}, uint32(i)) }
	dead := func(given bool) int64 {
		s := openAt(t, filepath.Join(t.TempDir(), "r.duckdb"))
		defer s.Close()
		apply := func(a store.MirrorApply, replaced int64) {
			t.Helper()
			a.Project, a.Import = 1, "imp"
			if given {
				a.Replaced = &replaced
			}
			if err := s.MirrorApply(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		var rows []store.MirrorRow
		for i := range 10 {
			rows = append(rows, store.MirrorRow{Key: key(i), Hash: []byte{0}, Flag: store.MirrorPending})
		}
		apply(store.MirrorApply{Gen: 1, Rows: rows}, 0)
		if err := s.MirrorSettle(ctx, 1, "imp", ""); err != nil {
			t.Fatal(err)
		}
		// Keys 0-3 change, 4-5 are removed, 10-11 are new.
		rows = rows[:0]
		for _, i := range []int{0, 1, 2, 3, 10, 11} {
			rows = append(rows, store.MirrorRow{Key: key(i), Hash: []byte{1}, Flag: store.MirrorPending})
		}
		apply(store.MirrorApply{Gen: 2, Rows: rows, Remove: [][]byte{key(4), key(5)}}, 6)
		_, d, err := mirrorMarks(ctx, s.db, 1, "imp")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	counted, given := dead(false), dead(true)
	if counted != given || given != 8 {
		t.Fatalf("dead rows: %d counted by the store, %d from the caller's count; want 8 (4 superseded, 2 removed + their tombstones)", counted, given)
	}
}
