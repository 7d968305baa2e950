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
	run := func(id string, atMs int64) store.LedgerRun {
		return store.LedgerRun{Project: 1, Import: "imp", Run: id, AtMs: atMs}
	}
	add := func(r store.LedgerRun, entries []store.LedgerEntry, q []store.QuarantineRow) {
		t.Helper()
		if err := hd.s.AddLedger(ctx, r, entries, q); err != nil {
			t.Fatal(err)
		}
	}
	add(run("r1", 1000), []store.LedgerEntry{
		{Hash: hash, Outcome: store.OutcomeImported},
		{Hash: other, Outcome: store.OutcomeImported},
	}, nil)
	add(run("r2", 2000), []store.LedgerEntry{{Hash: hash, Outcome: store.OutcomeRefused, Field: "time", Reason: "bad time"}},
		[]store.QuarantineRow{{Hash: hash, Key: key, Run: "r2", AtMs: 2000, Field: "time", Reason: "bad time", Row: []byte{1, 2, 3}}})
	// Seen right away, before a restart.
	if got, err := hd.s.LedgerHistory(ctx, 1, "imp", other, 10); err != nil || len(got) != 1 || got[0].Run != "r1" {
		t.Fatalf("history of order-43 = %+v, %v", got, err)
	}
	// Another import's entries for the same key stay apart; so do
	// another project's.
	add(store.LedgerRun{Project: 1, Import: "other", Run: "x", AtMs: 5000}, []store.LedgerEntry{{Hash: hash, Outcome: store.OutcomeDuplicate}}, nil)
	add(store.LedgerRun{Project: 2, Import: "imp", Run: "y", AtMs: 5000}, []store.LedgerEntry{{Hash: hash, Outcome: store.OutcomeDuplicate}}, nil)
	// Mirror's outcomes, in one append of a run.
	mirrorKey := store.LedgerKeyHash("m-1")
	add(run("m1", 1500), []store.LedgerEntry{{Hash: mirrorKey, Outcome: store.OutcomeInserted}}, nil)
	add(run("m2", 1600), []store.LedgerEntry{{Hash: mirrorKey, Outcome: store.OutcomeUpdated}}, nil)
	add(run("m3", 1700), []store.LedgerEntry{{Hash: mirrorKey, Outcome: store.OutcomeDeleted}}, nil)
	hd.reopen(t)
	got, err := hd.s.LedgerHistory(ctx, 1, "imp", hash, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Run != "r2" || got[0].AtMs != 2000 || got[0].Outcome != store.OutcomeRefused || got[0].Field != "time" || got[0].Reason != "bad time" ||
		got[1].Run != "r1" || got[1].AtMs != 1000 || got[1].Outcome != store.OutcomeImported || got[1].Field != "" || got[1].Reason != "" {
		t.Fatalf("history = %+v", got)
	}
	if got, _ := hd.s.LedgerHistory(ctx, 1, "imp", mirrorKey, 10); len(got) != 3 || got[0].Outcome != store.OutcomeDeleted ||
		got[1].Outcome != store.OutcomeUpdated || got[2].Outcome != store.OutcomeInserted || got[2].Run != "m1" {
		t.Fatalf("mirror key history = %+v", got)
	}
	if got, _ := hd.s.LedgerHistory(ctx, 1, "imp", hash, 1); len(got) != 1 || got[0].Run != "r2" {
		t.Fatalf("history limited to 1 = %+v", got)
	}
	// A second refusal of the key replaces its quarantine row.
	add(run("r3", 3000), nil, []store.QuarantineRow{
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
	if n != 6 {
		t.Fatalf("pruned %d, want 6 (r1's two entries, r2's, m1-m3's)", n)
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
	if got, _ = hd.s.LedgerHistory(ctx, 2, "imp", hash, 10); len(got) != 1 || got[0].Run != "y" {
		t.Fatalf("other project's history = %+v", got)
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

// testLedgerPruneMidRun: a prune that takes a run still appending (its
// start is older than the cut) leaves the run's later entries visible,
// and the next prune takes them too: none are left unreachable.
func testLedgerPruneMidRun(t *testing.T, h Harness) {
	ctx := context.Background()
	hd := open(t, h)
	r := store.LedgerRun{Project: 1, Import: "imp", Run: "long", AtMs: 1000}
	first, later := store.LedgerKeyHash("first"), store.LedgerKeyHash("later")
	if err := hd.s.AddLedger(ctx, r, []store.LedgerEntry{{Hash: first, Outcome: store.OutcomeImported}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := hd.s.LedgerHistory(ctx, 1, "imp", first, 10); err != nil || len(got) != 1 {
		t.Fatalf("history before the prune = %+v, %v", got, err)
	}
	if n, err := hd.s.PruneLedger(ctx, 2000); err != nil || n != 1 {
		t.Fatalf("first prune: %d, %v; want 1", n, err)
	}
	if err := hd.s.AddLedger(ctx, r, []store.LedgerEntry{{Hash: later, Outcome: store.OutcomeDuplicate}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := hd.s.LedgerHistory(ctx, 1, "imp", later, 10); err != nil || len(got) != 1 || got[0].Run != "long" {
		t.Fatalf("history of an entry added after its run was pruned = %+v, %v", got, err)
	}
	if n, err := hd.s.PruneLedger(ctx, 2000); err != nil || n != 1 {
		t.Fatalf("second prune: %d, %v; want 1 (the later entry)", n, err)
	}
}
