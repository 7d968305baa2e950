package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
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
