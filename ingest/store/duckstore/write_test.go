package duckstore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestFailedWriteRemovesItsKeys: plan puts a write's new keys into the
// dedup set before the log append; when the append fails they must come
// out again (or a retry would be dropped as duplicates of nothing), while
// keys that were already committed stay.
func TestFailedWriteRemovesItsKeys(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	ctx := context.Background()
	first := storetest.GenEvents(1, 100, 0)
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: first}}); err != nil {
		t.Fatal(err)
	}
	// The second write repeats two committed events and has 50 new ones,
	// one of them twice.
	fresh := storetest.GenEvents(1, 50, 1_000_000)
	second := append(append([]store.Event{first[0], first[1]}, fresh...), fresh[7])
	if err := s.wal.Close(); err != nil { // every append now fails
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: second}}); err == nil {
		t.Fatal("write to a closed log succeeded")
	}
	if s.keys.len() != len(first) {
		t.Fatalf("dedup set holds %d keys after the failed write, want %d", s.keys.len(), len(first))
	}
	for i := range first {
		if !s.keys.has(first[i].Key) {
			t.Fatalf("committed key %d lost by the failed write's undo", i)
		}
	}
	for i := range fresh {
		if s.keys.has(fresh[i].Key) {
			t.Fatalf("key %d of the failed write left in the set", i)
		}
	}
}
