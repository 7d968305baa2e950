package duckstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestReopenAdoptsKeys: a clean Close keeps the set (runs and manifest);
// Open adopts it without reading the table, removes the manifest, and
// dedups against the adopted keys, tombstones included.
func TestReopenAdoptsKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	ctx := context.Background()
	s := openWith(t, path, testOptions)
	evs := storetest.GenEvents(1, 300, 0)
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	// A key removed from a run leaves a tombstone the manifest must keep.
	tk := s.keys.(*tieredKeys)
	if err := errors.Join(tk.spill(), tk.waitSpill()); err != nil {
		t.Fatal(err)
	}
	if err := tk.remove(evs[0].Key); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(path+".keys", keysManifestName)
	if _, err := os.Stat(manifest); err != nil {
		t.Fatalf("Close kept no manifest: %v", err)
	}

	s = openWith(t, path, testOptions)
	defer s.Close()
	tk = s.keys.(*tieredKeys)
	if len(tk.runs) == 0 || tk.len() != len(evs)-1 {
		t.Fatalf("adopted %d runs, %d keys; want runs and %d keys", len(tk.runs), tk.len(), len(evs)-1)
	}
	if _, err := os.Stat(manifest); !os.IsNotExist(err) {
		t.Fatalf("manifest survived Open (a crash would adopt stale runs): %v", err)
	}
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: append(evs[:10:10], storetest.GenEvents(1, 5, 1e9)...)}})
	if err != nil {
		t.Fatal(err)
	}
	// evs[0]'s key was removed from the set: it counts as new again.
	if res.Duplicates != 9 || res.Inserted != 6 {
		t.Fatalf("after adoption: %d duplicates, %d inserted; want 9 and 6", res.Duplicates, res.Inserted)
	}
}

// TestReopenRebuildsChangedTables: when the tables changed after the
// Close that kept the set, Open rebuilds it from them instead.
func TestReopenRebuildsChangedTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	ctx := context.Background()
	s := openWith(t, path, testOptions)
	evs := storetest.GenEvents(1, 50, 0)
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	// A row with a key of its own, behind the store's back.
	_, err = db.Exec(`INSERT INTO events SELECT * REPLACE (k_hi + 1 AS k_hi, seq + 1000 AS seq) FROM events LIMIT 1`)
	if err = errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	s = openWith(t, path, testOptions)
	defer s.Close()
	if got := s.keys.len(); got != len(evs)+1 {
		t.Fatalf("set holds %d keys after the tables changed; want %d (rebuilt)", got, len(evs)+1)
	}
}

// TestKeepAdoptModel keeps a set in every state a Close can meet (a spill
// or merge in progress, tombstones, keys in the recent tier) and checks
// that the adopted set answers as the kept one, then goes on taking adds
// and removes; a manifest for other tables' state is not adopted.
func TestKeepAdoptModel(t *testing.T) {
	cfg := keysConfig{recentCap: 50, maxRuns: 3, maxTombs: 40}
	pool := randomKeys(3000, 31)
	r := rand.New(rand.NewPCG(5, 6))
	model := map[store.Key]bool{}
	dir := filepath.Join(t.TempDir(), "x.keys")
	tk, err := newTieredKeys(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	meta := keysMeta{AppliedLSN: 1, Events: 1, MaxSeq: 1}
	for round := range 6 {
		for range 700 {
			k := pool[r.IntN(len(pool))]
			if r.IntN(5) == 0 {
				if err := tk.remove(k); err != nil {
					t.Fatal(err)
				}
				delete(model, k)
				continue
			}
			got, err := tk.add(k)
			if err != nil {
				t.Fatal(err)
			}
			if got == model[k] {
				t.Fatalf("round %d: add = %v; stored: %v", round, got, model[k])
			}
			model[k] = true
		}
		if err := tk.keep(meta); err != nil {
			t.Fatal(err)
		}
		if err := tk.close(); err != nil { // after keep: nothing to do
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, keysManifestName)); err != nil {
			t.Fatal(err)
		}
		if round == 3 {
			// A damaged filter file: the run's filter is rebuilt from its keys.
			filters, _ := filepath.Glob(filepath.Join(dir, "*"+filterSuffix))
			if len(filters) == 0 {
				t.Fatal("keep wrote no filter files")
			}
			b, err := os.ReadFile(filters[0])
			if err != nil {
				t.Fatal(err)
			}
			clear(b)
			if err := os.WriteFile(filters[0], b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var ok bool
		if tk, ok, _, err = adoptTieredKeys(dir, cfg, meta); err != nil || !ok {
			t.Fatalf("round %d: adopt: %v, %v", round, ok, err)
		}
		checkAgainst(t, tk, model, pool, round)
		meta.AppliedLSN++
	}
	// Kept for LSN 6; the tables say 7: not adopted (the set never took a
	// write, so there is no seq to catch up from), and the manifest, still
	// true of its runs, stays.
	if err := tk.keep(meta); err != nil {
		t.Fatal(err)
	}
	stale := meta
	stale.AppliedLSN++
	if got, _, _, err := adoptTieredKeys(dir, cfg, stale); err != nil || got != nil {
		t.Fatalf("adopted a manifest of other tables: %v, %v", got != nil, err)
	}
	got, exact, _, err := adoptTieredKeys(dir, cfg, meta)
	if err != nil || !exact {
		t.Fatalf("adopt again: %v, %v", exact, err)
	}
	checkAgainst(t, got, model, pool, 6)
	if err := got.close(); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenKeysNotKept: a remove that fails leaves a deleted event's key
// in the set (the store then asks for a restart). A clean Close must not
// keep that set, or the next Open would drop the event as a duplicate
// when it is sent again.
func TestBrokenKeysNotKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	ctx := context.Background()
	s := openWith(t, path, testOptions)
	evs := []store.Event{storetest.NewEvent(1, "e", "u1", 1000, "id-1", `{"$warehouse_import_id":"imp-1"}`)}
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	// An I/O error has() met is returned by the next remove (tieredKeys.err).
	s.keys.(*tieredKeys).err = errors.New("injected dedup key read error")
	if n, err := s.DeleteImportEvents(ctx, 1, "imp-1"); err == nil || n != 1 {
		t.Fatalf("delete with a failing remove: %d, %v; want 1 and an error", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path+".keys", keysManifestName)); !os.IsNotExist(err) {
		t.Fatalf("Close kept a set with a failed remove: %v", err)
	}
	s = openWith(t, path, testOptions)
	defer s.Close()
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}})
	if err != nil || res.Inserted != 1 {
		t.Fatalf("resending the deleted event: %+v, %v; want it inserted", res, err)
	}
}

// TestKeepRefusesFailedSet: the set itself remembers a failed remove, so
// keep writes no manifest even when the caller did not stop the store.
func TestKeepRefusesFailedSet(t *testing.T) {
	dir := t.TempDir()
	tk, err := newTieredKeys(dir, defaultKeysConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.add(store.Key{1}); err != nil {
		t.Fatal(err)
	}
	tk.err = errors.New("injected dedup key read error")
	if err := tk.remove(store.Key{1}); err == nil {
		t.Fatal("remove returned no error")
	}
	if err := tk.keep(keysMeta{}); err == nil {
		t.Fatal("keep kept a set after a failed remove")
	}
	if _, err := os.Stat(filepath.Join(dir, keysManifestName)); !os.IsNotExist(err) {
		t.Fatalf("manifest written: %v", err)
	}
}

// TestOpenRunsOutOfOrderClosesAll: a manifest whose runs are out of order
// is refused without leaving any run file open.
func TestOpenRunsOutOfOrderClosesAll(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs /proc/self/fd to count open files")
		}
		t.Skip("SKIPPED: needs /proc/self/fd to count open files (Linux)")
	}
	dir := filepath.Join(t.TempDir(), "x.keys")
	tk, err := newTieredKeys(dir, keysConfig{recentCap: 50, maxRuns: 100, maxTombs: 40})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range randomKeys(400, 7) {
		if _, err := tk.add(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := tk.keep(keysMeta{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, keysManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m keysManifest
	if err := json.Unmarshal(b, &m); err != nil || len(m.Runs) < 3 {
		t.Fatalf("manifest: %d runs, %v; want at least 3", len(m.Runs), err)
	}
	slices.Reverse(m.Runs)
	openFiles := func() int {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(fds)
	}
	before := openFiles()
	if runs, err := openRuns(dir, m.Runs); err == nil {
		t.Fatalf("opened %d runs out of order", len(runs))
	}
	if after := openFiles(); after != before {
		t.Fatalf("%d files open after the refused manifest, %d before", after, before)
	}
}

// TestAdoptReadsMergedFilter: a merge's output has a filter sized for
// its inputs' keys, more than it holds; adoption reads that filter back
// instead of hashing the keys again. The run's keys are overwritten so
// that only the filter file can make the adoption succeed.
func TestAdoptReadsMergedFilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x.keys")
	cfg := keysConfig{recentCap: 50, maxRuns: 8, maxTombs: 40, loadRunKeys: 50}
	tk, err := newTieredKeys(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := randomKeys(1000, 9)
	for range 2 { // repeats: the merge writes 1000 keys of 2000 read
		for _, k := range keys {
			if err := tk.load(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tk.finishLoad(); err != nil {
		t.Fatal(err)
	}
	if len(tk.runs) != 1 || tk.runs[0].n != len(keys) || len(tk.runs[0].bloom.blocks) == len(newBloom(len(keys)).blocks) {
		t.Fatalf("after the load: %d runs; want one merged run of %d keys with a filter sized for more", len(tk.runs), len(keys))
	}
	path := tk.runs[0].path
	meta := keysMeta{AppliedLSN: 1, Events: 1000, MaxSeq: 1000}
	if err := tk.keep(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, len(keys)*keyBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, ok, _, err := adoptTieredKeys(dir, cfg, meta)
	if err != nil || !ok {
		t.Fatalf("adopt: %v, %v; want the run adopted from its filter file", ok, err)
	}
	defer tk.close()
	if tk.len() != len(keys) {
		t.Fatalf("adopted %d keys, want %d", tk.len(), len(keys))
	}
}
