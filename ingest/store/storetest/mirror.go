package storetest

import (
	"bytes"
	"context"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func mirrors(t *testing.T, s store.Store) store.Mirrors {
	t.Helper()
	m, ok := s.(store.Mirrors)
	if !ok {
		t.Fatalf("%T does not implement store.Mirrors", s)
	}
	return m
}

func lookupAll(t *testing.T, m store.Mirrors, gen int64, keys ...string) map[string]store.MirrorRow {
	t.Helper()
	bs := make([][]byte, len(keys))
	for i, k := range keys {
		bs[i] = []byte(k)
	}
	got := map[string]store.MirrorRow{}
	if err := m.MirrorLookup(context.Background(), 1, "imp", gen, bs, func(r store.MirrorRow) error {
		got[string(r.Key)] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func unseen(t *testing.T, m store.Mirrors, gen int64) []string {
	t.Helper()
	var keys []string
	if err := m.MirrorUnseen(context.Background(), 1, "imp", gen, func(r store.MirrorRow) error {
		keys = append(keys, string(r.Key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// testMirrorState: a Mirror sync's key → hash state round-trips, marks
// keys seen by a generation, lists the unseen in key order across pages,
// settles pending rows and forgets deleted ones, survives a reopen, and
// an apply deletes the events it names (freeing their dedup keys, so a
// new version with the same key is stored).
func testMirrorState(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	m := mirrors(t, hd.s)
	old := NewEvent(1, "e", "u1", 1000, "id-1", `{"v":1}`)
	keep := NewEvent(1, "e", "u2", 2000, "id-2", `{"v":2}`)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{old, keep}})

	var rows []store.MirrorRow
	for i := range 2500 { // crosses MirrorUnseen's pages
		k := []byte{byte(i >> 8), byte(i)}
		rows = append(rows, store.MirrorRow{Key: k, Hash: []byte{1}, Ref: nil, Flag: store.MirrorPending})
	}
	rows = append(rows, store.MirrorRow{Key: []byte("k-old"), Hash: []byte("h1"),
		Ref: store.EventRef{Key: old.Key, TimeMs: old.TimeMs}.Bytes(), Flag: store.MirrorPending})
	if err := m.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: 1, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if n, err := m.MirrorCount(ctx, 1, "imp"); err != nil || n != 2501 {
		t.Fatalf("count = %d, %v; want 2501", n, err)
	}
	if err := m.MirrorSettle(ctx, 1, "imp", ""); err != nil {
		t.Fatal(err)
	}
	got := lookupAll(t, m, 0, "k-old", "absent")
	r, ok := got["k-old"]
	if len(got) != 1 || !ok || string(r.Hash) != "h1" || r.Flag != store.MirrorSettled {
		t.Fatalf("lookup = %+v", got)
	}
	if ref, ok := store.ParseEventRef(r.Ref); !ok || ref.Key != old.Key || ref.TimeMs != 1000 {
		t.Fatalf("ref = %x", r.Ref)
	}
	if u := unseen(t, m, 1); len(u) != 0 {
		t.Fatalf("unseen by gen 1 = %d keys, want none", len(u))
	}
	// Generation 2 sees k-old only: the rest is unseen, in key order.
	lookupAll(t, m, 2, "k-old")
	u := unseen(t, m, 2)
	if len(u) != 2500 {
		t.Fatalf("unseen = %d keys, want 2500", len(u))
	}
	for i := 1; i < len(u); i++ {
		if bytes.Compare([]byte(u[i-1]), []byte(u[i])) >= 0 {
			t.Fatalf("unseen not in key order at %d", i)
		}
	}

	// Replace the event: delete the old version, mark the key pending,
	// then a new version with the same dedup key is stored, not a duplicate.
	repl := NewEvent(1, "e", "u1", 1000, "id-1", `{"v":10}`)
	if err := m.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: 2,
		Rows:         []store.MirrorRow{{Key: []byte("k-old"), Hash: []byte("h2"), Ref: store.EventRef{Key: repl.Key, TimeMs: 1000}.Bytes(), Flag: store.MirrorPending}},
		Remove:       [][]byte{{0, 0}},
		DeleteEvents: []store.EventRef{{Key: old.Key, TimeMs: old.TimeMs}}}); err != nil {
		t.Fatal(err)
	}
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{keep})
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{repl}}), 1, 0, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{repl, keep})
	if r := lookupAll(t, m, 0, "k-old")["k-old"]; r.Flag != store.MirrorPending || string(r.Hash) != "h2" {
		t.Fatalf("after apply: %+v", r)
	}
	// A tombstone stays until settled, then goes.
	if err := m.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "imp", Gen: 2,
		Rows: []store.MirrorRow{{Key: []byte{0, 1}, Hash: []byte{1}, Flag: store.MirrorDeleting}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := m.MirrorCount(ctx, 1, "imp"); n != 2499 {
		t.Fatalf("count with a tombstone = %d, want 2499", n)
	}
	hd.reopen(t)
	m = mirrors(t, hd.s)
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{repl, keep})
	if got := lookupAll(t, m, 0, "\x00\x01", "\x00\x00"); len(got) != 1 || got["\x00\x01"].Flag != store.MirrorDeleting {
		t.Fatalf("after reopen: %+v", got)
	}
	if err := m.MirrorSettle(ctx, 1, "imp", ""); err != nil {
		t.Fatal(err)
	}
	if got := lookupAll(t, m, 0, "\x00\x01", "k-old"); len(got) != 1 || got["k-old"].Flag != store.MirrorSettled {
		t.Fatalf("after settle: %+v", got)
	}
	// Another import's state is separate; dropping forgets one import's.
	if err := m.MirrorApply(ctx, store.MirrorApply{Project: 1, Import: "other", Gen: 1,
		Rows: []store.MirrorRow{{Key: []byte("k-old"), Hash: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.MirrorDrop(ctx, 1, "imp"); err != nil {
		t.Fatal(err)
	}
	if n, _ := m.MirrorCount(ctx, 1, "imp"); n != 0 {
		t.Fatalf("count after drop = %d", n)
	}
	if n, _ := m.MirrorCount(ctx, 1, "other"); n != 1 {
		t.Fatalf("other import's count = %d, want 1", n)
	}
	// Run counts: the last save of a run wins.
	for _, c := range []store.MirrorCounts{{Inserted: 1, Rows: 1}, {Inserted: 5, Updated: 2, Deleted: 1, Unchanged: 9, Rows: 16}} {
		if err := m.MirrorRecordRun(ctx, 1, "run-a", c); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := m.MirrorRunCounts(ctx, 1, []string{"run-a", "run-b"})
	if err != nil || len(counts) != 1 || counts["run-a"] != (store.MirrorCounts{Inserted: 5, Updated: 2, Deleted: 1, Unchanged: 9, Rows: 16}) {
		t.Fatalf("run counts = %v, %v", counts, err)
	}
}
