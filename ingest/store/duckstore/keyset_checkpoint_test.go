package duckstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestCheckpointBehindDeleteRebuilds: events deleted after the last crash
// checkpoint leave keys in the runs it names. A start from that checkpoint
// (a crash before the next one) must notice, by the count of keyed events,
// and rebuild the set from the table, or a re-sent deleted event would be
// dropped as a duplicate. The crash is simulated by putting back the key
// files as they were at the checkpoint after a clean Close.
func TestCheckpointBehindDeleteRebuilds(t *testing.T) {
	c := newKeysCrash(t)
	keysDir, saved := c.keysDir, c.saved
	ctx := context.Background()
	s := openWith(t, c.path, c.opt)
	batch := func(i int, props string) store.Batch {
		evs := make([]store.Event, 500)
		for j := range evs {
			evs[j] = storetest.NewEvent(1, "e", "u", int64(i)*10_000+int64(j), fmt.Sprintf("id-%d-%d", i, j), props)
		}
		return store.Batch{Project: 1, Events: evs}
	}
	// Spills of 2,000 keys run in the background and the write after one
	// finished checkpoints it: write until a checkpoint names the first
	// run (which holds the import's 1,000 keys).
	var m keysManifest
	written := 0
	for ; written < 60 && m.N < 2000; written++ {
		props := `{}`
		if written < 2 {
			props = `{"$warehouse_import_id":"imp-1"}`
		}
		if _, err := s.Write(ctx, []store.Batch{batch(written, props)}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(keysDir, keysManifestName)); err == nil && json.Unmarshal(b, &m) != nil {
			t.Fatal(err)
		}
	}
	if !m.Checkpoint || m.N < 2000 {
		t.Fatalf("no checkpoint naming the spilled keys after %d batches: %+v", written, m)
	}
	if err := os.CopyFS(saved, os.DirFS(keysDir)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteImportEvents(ctx, 1, "imp-1"); err != nil || n != 1000 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	s = c.reopen(t, s)
	defer s.Close()
	if want := written*500 - 1000; s.keys.len() != want {
		t.Fatalf("after the start: %d keys, want %d (the table's)", s.keys.len(), want)
	}
	for i, want := range []int{500, 500, 0} {
		res, err := s.Write(ctx, []store.Batch{batch(i, `{}`)})
		if err != nil || res.Inserted != want {
			t.Fatalf("re-sent batch %d: inserted %d, %v; want %d", i, res.Inserted, err, want)
		}
	}
}

// TestCheckpointCatchUp: a start from a checkpoint adds the keys stored
// after it and answers as the table does, without a rebuild.
func TestCheckpointCatchUp(t *testing.T) {
	c := newKeysCrash(t)
	keysDir, saved := c.keysDir, c.saved
	ctx := context.Background()
	s := openWith(t, c.path, c.opt)
	batch := func(i int) store.Batch {
		return store.Batch{Project: 1, Events: storetest.GenEvents(1, 500, int64(i)*10_000)}
	}
	var m keysManifest
	n := 0
	for ; n < 60 && !m.Checkpoint; n++ { // until a spill is checkpointed
		if _, err := s.Write(ctx, []store.Batch{batch(n)}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(keysDir, keysManifestName)); err == nil && json.Unmarshal(b, &m) != nil {
			t.Fatal(err)
		}
	}
	if !m.Checkpoint {
		t.Fatalf("no checkpoint after %d batches", n)
	}
	if err := os.CopyFS(saved, os.DirFS(keysDir)); err != nil {
		t.Fatal(err)
	}
	for i := n; i < n+3; i++ { // after the checkpoint: only the table has them
		if _, err := s.Write(ctx, []store.Batch{batch(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s = c.reopen(t, s)
	defer s.Close()
	if tk := s.keys.(*tieredKeys); tk.ckpt.coveredSeq != m.FromSeq || s.keys.len() != (n+3)*500 {
		t.Fatalf("start: %d keys, covered from seq %d; want %d adopted from the checkpoint's seq %d", s.keys.len(), tk.ckpt.coveredSeq, (n+3)*500, m.FromSeq)
	}
	for i := range n + 4 {
		want := 0
		if i == n+3 {
			want = 500
		}
		res, err := s.Write(ctx, []store.Batch{batch(i)})
		if err != nil || res.Inserted != want {
			t.Fatalf("batch %d again: inserted %d, %v; want %d", i, res.Inserted, err, want)
		}
	}
}

// keysCrash is a store whose key files are saved at a checkpoint and put
// back after a clean Close, as a crash after that checkpoint leaves them.
type keysCrash struct {
	path, keysDir, saved string
	opt                  Options
}

func newKeysCrash(t *testing.T) keysCrash {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	opt := testOptions
	opt.keys = smallKeys
	return keysCrash{path: path, keysDir: path + ".keys", saved: filepath.Join(t.TempDir(), "saved"), opt: opt}
}

// reopen closes s, puts the saved key files back and opens the store again.
func (c keysCrash) reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(c.keysDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(c.saved, c.keysDir); err != nil {
		t.Fatal(err)
	}
	return openWith(t, c.path, c.opt)
}
