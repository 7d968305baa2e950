package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

// commonTags returns a sync run's tags as a batch's Common.
func commonTags(importID, runID string) []byte {
	return fmt.Appendf(nil, `{"$warehouse_import_id":%q,"$warehouse_import_job_id":%q,"$import":true,"$source":"warehouse-import"}`,
		importID, runID)
}

// withCommon is e as scans return it: its own props, then common's members.
func withCommon(e store.Event, common []byte) store.Event {
	e.Props = store.SpliceProps(nil, e.Props, common)
	return e
}

// testCommonProps: a batch's Common comes back in every one of its events'
// props, after their own members, across batches of one write, writes,
// a restart and a scan long enough to page; duplicates still count as such;
// and deleting an import's events finds them by a $warehouse_import_id
// that only the common properties hold.
func testCommonProps(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	run1, run2 := commonTags("imp-1", "run-1"), commonTags("imp-1", "run-2")
	a := []store.Event{
		NewEvent(1, "e", "u1", 1000, "id-1", `{"n":1}`),
		NewEvent(1, "e", "u2", 2000, "id-2", `{}`),
		NewEvent(1, "e", "u3", 3000, "", `{"s":"x","o":{"k":[1,2]}}`),
	}
	plain := []store.Event{NewEvent(1, "e", "u4", 4000, "id-4", `{"p":true}`)}
	b := []store.Event{
		NewEvent(1, "e", "u1", 1000, "id-1", `{"n":1}`), // a duplicate of a[0]
		NewEvent(1, "e", "u5", 5000, "id-5", `{"n":5}`),
	}
	res := mustWrite(t, hd.s,
		store.Batch{Project: 1, Common: run1, Events: a},
		store.Batch{Project: 1, Events: plain},
		store.Batch{Project: 1, Common: run2, Events: b},
		store.Batch{Project: 2, Common: run1, Events: []store.Event{NewEvent(2, "e", "u1", 1000, "id-1", `{"q":2}`)}})
	wantCounts(t, res, 6, 1, 0)
	// A later write names run-1's properties again.
	later := []store.Event{NewEvent(1, "f", "u6", 6000, "id-6", `{"m":6}`)}
	mustWrite(t, hd.s, store.Batch{Project: 1, Common: run1, Events: later})
	want := []store.Event{withCommon(a[0], run1), withCommon(a[1], run1), withCommon(a[2], run1),
		plain[0], withCommon(b[1], run2), withCommon(later[0], run1)}
	requireEvents(t, Collect(t, hd.s, all(1)), want)
	requireEvents(t, Collect(t, hd.s, all(2)), []store.Event{withCommon(NewEvent(2, "e", "u1", 1000, "id-1", `{"q":2}`), run1)})

	// Enough events for a scan to go past its first page.
	many := GenEvents(3, 25_000, 10_000)
	run3 := commonTags("imp-3", "run-3")
	for i := 0; i < len(many); i += 5000 {
		mustWrite(t, hd.s, store.Batch{Project: 3, Common: run3, Events: many[i : i+5000]})
	}
	hd.reopen(t)
	requireEvents(t, Collect(t, hd.s, all(1)), want)
	got := Collect(t, hd.s, all(3))
	if len(got) != len(many) {
		t.Fatalf("project 3: %d events, want %d", len(got), len(many))
	}
	for i := range got {
		if w := store.SpliceProps(nil, many[i].Props, run3); string(got[i].Props) != string(w) {
			t.Fatalf("project 3, event %d: props %q, want %q", i, got[i].Props, w)
		}
	}

	n, err := hd.s.DeleteImportEvents(ctx, 1, "imp-1")
	if err != nil || n != 5 {
		t.Fatalf("delete imp-1: %d, %v; want 5", n, err)
	}
	requireEvents(t, Collect(t, hd.s, all(1)), plain)
	if got := Collect(t, hd.s, all(2)); len(got) != 1 {
		t.Fatalf("project 2 has %d events, want its 1 untouched", len(got))
	}
	// The keys are free again: the same events are stored anew.
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Common: run2, Events: a[:2]}), 2, 0, 0)
}

// testBadCommon: a batch whose common properties SpliceProps cannot splice
// fails its write, which stores nothing of any of its batches (a merge
// beside it included) and leaves the store writable.
func testBadCommon(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	if err := hd.s.SetMode(ctx, 1, identity.Original); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`[1,2,3]`, `{ }`, `{ "a":1}`, `{"a":1 }`, `{"a":`, `"x"`, `{`} {
		_, err := hd.s.Write(ctx, []store.Batch{
			{Project: 1, Merges: []store.Merge{{DistinctIDs: [2]string{"a", "b"}, TimeMs: 1, IngestMs: 1, Props: []byte(`{}`)}}},
			{Project: 1, Events: []store.Event{NewEvent(1, "e", "u1", 1000, "id-1", `{"n":1}`)}, Common: []byte(bad)},
		})
		if !errors.Is(err, store.ErrBadCommon) {
			t.Fatalf("common %q: %v, want ErrBadCommon", bad, err)
		}
	}
	if got := Collect(t, hd.s, all(1)); len(got) != 0 {
		t.Fatalf("failed writes stored %d events", len(got))
	}
	if got := h.Merges(t, hd.s, 1); len(got) != 0 {
		t.Fatalf("failed writes stored %d merges", len(got))
	}
	ok := commonTags("imp", "run")
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{NewEvent(1, "e", "u1", 1000, "id-1", `{"n":1}`)}, Common: ok}), 1, 0, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{withCommon(NewEvent(1, "e", "u1", 1000, "id-1", `{"n":1}`), ok)})
}
