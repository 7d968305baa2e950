package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// testLedger: a key's entries come back newest first and survive a
// restart; quarantine rows are one per key, paged by hash, removed by
// Unquarantine; pruning drops what is older than the retention.
func testLedger(t *testing.T, h Harness) {
	ctx := context.Background()
	hd := open(t, h)
	key := "order-42"
	hash := store.LedgerKeyHash(key)
	other := store.LedgerKeyHash("order-43")
	add := func(entries []store.LedgerEntry, q []store.QuarantineRow) {
		t.Helper()
		if err := hd.s.AddLedger(ctx, 1, "imp", entries, q); err != nil {
			t.Fatal(err)
		}
	}
	add([]store.LedgerEntry{
		{Hash: hash, Key: key, Run: "r1", AtMs: 1000, Outcome: store.OutcomeImported},
		{Hash: other, Key: "order-43", Run: "r1", AtMs: 1000, Outcome: store.OutcomeImported},
	}, nil)
	add([]store.LedgerEntry{{Hash: hash, Key: key, Run: "r2", AtMs: 2000, Outcome: store.OutcomeRefused, Field: "time", Reason: "bad time"}},
		[]store.QuarantineRow{{Hash: hash, Key: key, Run: "r2", AtMs: 2000, Field: "time", Reason: "bad time", Row: []byte{1, 2, 3}}})
	// Another import's entries for the same key stay apart.
	if err := hd.s.AddLedger(ctx, 1, "other", []store.LedgerEntry{{Hash: hash, Key: key, Run: "x", AtMs: 5000, Outcome: store.OutcomeDuplicate}}, nil); err != nil {
		t.Fatal(err)
	}
	hd.reopen(t)
	got, err := hd.s.LedgerHistory(ctx, 1, "imp", hash, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Run != "r2" || got[0].Outcome != store.OutcomeRefused || got[0].Field != "time" || got[0].Reason != "bad time" ||
		got[1].Run != "r1" || got[1].Outcome != store.OutcomeImported || got[1].Key != key || got[1].Hash != hash {
		t.Fatalf("history = %+v", got)
	}
	// A second refusal of the key replaces its quarantine row.
	add(nil, []store.QuarantineRow{
		{Hash: hash, Key: key, Run: "r3", AtMs: 3000, Field: "time", Reason: "still bad", Row: []byte{4}},
		{Hash: other, Key: "order-43", Run: "r3", AtMs: 3000, Field: "event", Reason: "empty", Row: []byte{5}},
	})
	q, err := hd.s.Quarantined(ctx, 1, "imp", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	first := hash
	if slices.Compare(other[:], hash[:]) < 0 {
		first = other
	}
	if len(q) != 1 || q[0].Hash != first {
		t.Fatalf("first page = %+v", q)
	}
	rest, err := hd.s.Quarantined(ctx, 1, "imp", &q[0].Hash, 10)
	if err != nil {
		t.Fatal(err)
	}
	all := append(q, rest...)
	if len(all) != 2 {
		t.Fatalf("quarantine = %+v", all)
	}
	for _, r := range all {
		if r.Hash == hash && (r.Run != "r3" || r.Reason != "still bad" || string(r.Row) != "\x04") {
			t.Fatalf("replaced row = %+v", r)
		}
	}
	if err := hd.s.Unquarantine(ctx, 1, "imp", [][16]byte{other}); err != nil {
		t.Fatal(err)
	}
	if q, _ = hd.s.Quarantined(ctx, 1, "imp", nil, 10); len(q) != 1 || q[0].Hash != hash {
		t.Fatalf("after unquarantine = %+v", q)
	}
	// Retention: entries and quarantine rows before 2500 go.
	n, err := hd.s.PruneLedger(ctx, 2500)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("pruned %d, want 3 (r1's two entries and r2's)", n)
	}
	if got, _ = hd.s.LedgerHistory(ctx, 1, "imp", hash, 10); len(got) != 0 {
		t.Fatalf("history after prune = %+v", got)
	}
	if q, _ = hd.s.Quarantined(ctx, 1, "imp", nil, 10); len(q) != 1 {
		t.Fatalf("quarantine after prune = %+v (r3's row is newer than the cut)", q)
	}
	if got, _ = hd.s.LedgerHistory(ctx, 1, "other", hash, 10); len(got) != 1 {
		t.Fatalf("other import's history = %+v", got)
	}
}

// testWriteDupEvents: a write names the duplicate events of each batch by
// index, within the write and against what was stored before.
func testWriteDupEvents(t *testing.T, h Harness) {
	ctx := context.Background()
	s := open(t, h).s
	ev := func(id string) store.Event {
		e := store.Event{Name: "e", DistinctID: "u", TimeMs: 1000, InsertID: id, Props: []byte("{}"), IngestMs: 1}
		e.Key = store.DedupKey(1, e.Name, e.DistinctID, e.TimeMs, e.InsertID)
		return e
	}
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: []store.Event{ev("a")}}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: []store.Event{ev("b"), ev("a"), ev("c"), ev("b")}}})
	if err != nil {
		t.Fatal(err)
	}
	d := slices.Clone(res.Batches[0].DupEvents)
	slices.Sort(d)
	if !slices.Equal(d, []int32{1, 3}) || res.Duplicates != 2 {
		t.Fatalf("dup events = %v (duplicates %d), want [1 3]", d, res.Duplicates)
	}
}
