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
	path := filepath.Join(t.TempDir(), "x.duckdb")
	keysDir, saved := path+".keys", filepath.Join(t.TempDir(), "saved")
	ctx := context.Background()
	opt := testOptions
	opt.keys = smallKeys
	s := openWith(t, path, opt)
	batch := func(i int, props string) store.Batch {
		evs := make([]store.Event, 500)
		for j := range evs {
			evs[j] = storetest.NewEvent(1, "e", "u", int64(i)*10_000+int64(j), fmt.Sprintf("id-%d-%d", i, j), props)
		}
		return store.Batch{Project: 1, Events: evs}
	}
	for i := range 12 { // 6,000 keys: spills of 2,000, each checkpointed by the next write
		props := `{}`
		if i < 2 {
			props = `{"$warehouse_import_id":"imp-1"}`
		}
		if _, err := s.Write(ctx, []store.Batch{batch(i, props)}); err != nil {
			t.Fatal(err)
		}
	}
	var m keysManifest
	b, err := os.ReadFile(filepath.Join(keysDir, keysManifestName))
	if err != nil || json.Unmarshal(b, &m) != nil || !m.Checkpoint || m.N < 4000 {
		t.Fatalf("no checkpoint naming the spilled keys: %+v, %v", m, err)
	}
	if err := os.CopyFS(saved, os.DirFS(keysDir)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteImportEvents(ctx, 1, "imp-1"); err != nil || n != 1000 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(keysDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(saved, keysDir); err != nil {
		t.Fatal(err)
	}
	s = openWith(t, path, opt)
	defer s.Close()
	if s.keys.len() != 5000 {
		t.Fatalf("after the start: %d keys, want 5000 (the table's)", s.keys.len())
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
	path := filepath.Join(t.TempDir(), "x.duckdb")
	keysDir, saved := path+".keys", filepath.Join(t.TempDir(), "saved")
	ctx := context.Background()
	opt := testOptions
	opt.keys = smallKeys
	s := openWith(t, path, opt)
	batch := func(i int) store.Batch {
		return store.Batch{Project: 1, Events: storetest.GenEvents(1, 500, int64(i)*10_000)}
	}
	for i := range 10 {
		if _, err := s.Write(ctx, []store.Batch{batch(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.CopyFS(saved, os.DirFS(keysDir)); err != nil {
		t.Fatal(err)
	}
	var m keysManifest
	b, _ := os.ReadFile(filepath.Join(saved, keysManifestName))
	if json.Unmarshal(b, &m) != nil || !m.Checkpoint {
		t.Fatalf("no checkpoint: %s", b)
	}
	for i := 10; i < 13; i++ { // after the checkpoint: only the table has them
		if _, err := s.Write(ctx, []store.Batch{batch(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(keysDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(saved, keysDir); err != nil {
		t.Fatal(err)
	}
	s = openWith(t, path, opt)
	defer s.Close()
	if tk := s.keys.(*tieredKeys); tk.ckpt.coveredSeq != m.FromSeq || s.keys.len() != 6500 {
		t.Fatalf("start: %d keys, covered from seq %d; want 6500 adopted from the checkpoint's seq %d", s.keys.len(), tk.ckpt.coveredSeq, m.FromSeq)
	}
	for i := range 14 {
		want := 0
		if i == 13 {
			want = 500
		}
		res, err := s.Write(ctx, []store.Batch{batch(i)})
		if err != nil || res.Inserted != want {
			t.Fatalf("batch %d again: inserted %d, %v; want %d", i, res.Inserted, err, want)
		}
	}
}
