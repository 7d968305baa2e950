package duckstore

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestMirrorStateWithinSyncMemory keeps a 300k-key Mirror state under
// `tributary sync`'s DuckDB share (24 MB): with a primary-key index
// (an ART, which DuckDB keeps wholly in memory) a 100k-key state failed
// its upsert. It then changes every hundredth key, as a second run does,
// checks that this holds no memory DuckDB cannot spill, and what the
// lookups and the settle report.
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
	before := baseTableMiB(t, s)
	var rows []store.MirrorRow
	for _, k := range changed {
		rows = append(rows, store.MirrorRow{Key: k, Hash: []byte{2}, Flag: store.MirrorPending})
	}
	if err := s.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: 2, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	// Replacing the changed keys' rows by deleting them held DuckDB
	// version info for every vector of the state, which at 5M keys was
	// more than a sync's DuckDB share; new versions hold none
	// (mirror_versions.go).
	// Measured: deleting the old rows +3.5 MiB, appending versions +1.2
	// (the new rows' blocks, which do not grow with the state).
	if mib := baseTableMiB(t, s); mib-before > 2 {
		t.Fatalf("changing 1 %% of the keys took DuckDB's table memory from %.1f to %.1f MiB, want < 2 MiB more", before, mib)
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

// A Mirror apply that deletes events waits for the loader to apply the
// acknowledged writes. A loader that keeps failing (DuckDB out of memory)
// fails the apply with its error instead of holding it forever (a hang
// shows as the test binary's timeout); one that fails once is waited for.
func TestMirrorApplyFailingLoader(t *testing.T) {
	oom := errors.New("Out of Memory Error: could not allocate block")
	for _, tc := range []struct {
		name    string
		failing func() func(*duckdb.Conn) error
		wantErr bool
	}{
		{"keeps failing", func() func(*duckdb.Conn) error {
			return func(*duckdb.Conn) error { return oom }
		}, true},
		{"fails once", func() func(*duckdb.Conn) error {
			var once sync.Once
			return func(*duckdb.Conn) error {
				var err error
				once.Do(func() { err = oom })
				return err
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background() // as the run's flush had: nothing ends the wait
			s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
			defer func() {
				if err := s.Close(); err != nil {
					t.Logf("close: %v", err)
				}
			}()
			s.beforeCommit = tc.failing()
			evs := storetest.GenEvents(1, 100, 0)
			if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil {
				t.Fatal(err)
			}
			ev := store.EventRef{Key: evs[0].Key, TimeMs: evs[0].TimeMs}
			err := s.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: 1,
				Rows:         []store.MirrorRow{{Key: []byte("k"), Hash: []byte{1}, Flag: store.MirrorPending}},
				DeleteEvents: []store.EventRef{ev}})
			n, cerr := s.MirrorCount(ctx, 1, "imp")
			if cerr != nil {
				t.Fatal(cerr)
			}
			switch {
			case tc.wantErr && !errors.Is(err, oom):
				t.Fatalf("apply: %v, want the loader's error", err)
			case tc.wantErr && n != 0:
				t.Fatalf("a failed apply left %d state rows", n)
			case !tc.wantErr && (err != nil || n != 1):
				t.Fatalf("apply after one failed load: %v, %d state rows, want nil, 1", err, n)
			}
		})
	}
}
