package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

func user(id string, names ...string) store.Member {
	return store.Member{MemberKey: store.MemberKey{Kind: profile.User, ID: id}, Names: names}
}

func track(t *testing.T, s store.Store, imp, run string, ms ...store.Member) {
	t.Helper()
	if err := s.TrackMembers(context.Background(), 1, imp, run, ms); err != nil {
		t.Fatalf("track %s/%s: %v", imp, run, err)
	}
}

func settle(t *testing.T, s store.Store, imp, run string) {
	t.Helper()
	if err := s.SettleMembers(context.Background(), 1, imp, run); err != nil {
		t.Fatalf("settle %s/%s: %v", imp, run, err)
	}
}

// stale returns "kind/groupkey/id: names" lines in the order streamed.
func stale(t *testing.T, s store.Store, imp, run string) []string {
	t.Helper()
	var out []string
	err := s.StaleMembers(context.Background(), 1, imp, run, func(m store.StaleMember) error {
		out = append(out, fmt.Sprintf("%s/%s/%s: %s", m.Kind, m.GroupKey, m.ID, strings.Join(m.Names, ",")))
		return nil
	})
	if err != nil {
		t.Fatalf("stale %s/%s: %v", imp, run, err)
	}
	return out
}

func wantStale(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stale members:\ngot  %q\nwant %q", got, want)
	}
}

// testMembersOwnership: what a run no longer sets is stale, profiles a run
// did not meet are stale whole, a run that died before settling loses
// nothing, a refused row keeps what was owned, and the state survives a
// restart.
func testMembersOwnership(t *testing.T, h Harness) {
	hd := open(t, h)
	s := hd.s
	group := store.Member{MemberKey: store.MemberKey{Kind: profile.Group, GroupKey: "company", ID: "a"}, Names: []string{"size"}}
	track(t, s, "imp", "r1", user("a", "plan", "city"), user("b", "plan"), group)
	track(t, s, "imp", "r1", user("a", "json.k")) // met again in the run: the union
	track(t, s, "other", "r1", user("a", "x"))    // another import owns its own
	wantStale(t, stale(t, s, "imp", "r1"))
	settle(t, s, "imp", "r1")
	hd.reopen(t)
	s = hd.s

	// r2: a lost city and json.k, b is gone, c is new; the group is gone.
	track(t, s, "imp", "r2", user("a", "plan"), user("c", "plan"))
	wantStale(t, stale(t, s, "imp", "r2"),
		"user//a: city,json.k", "user//b: plan", "group/company/a: size")
	// Nothing is forgotten before the run settles.
	wantStale(t, stale(t, s, "imp", "r2"),
		"user//a: city,json.k", "user//b: plan", "group/company/a: size")
	settle(t, s, "imp", "r2")
	wantStale(t, stale(t, s, "imp", "r2"))
	wantStale(t, stale(t, s, "imp", ""), "user//a: plan", "user//c: plan")
	wantStale(t, stale(t, s, "other", ""), "user//a: x")

	// r3 dies before it settles; r4 must still unset what r3 set.
	track(t, s, "imp", "r3", user("a", "plan", "r3only"), user("c", "plan", "r3c"))
	hd.reopen(t)
	s = hd.s
	track(t, s, "imp", "r4", user("a", "plan"))
	wantStale(t, stale(t, s, "imp", "r4"), "user//a: r3only", "user//c: plan,r3c")

	// r5: a's row is refused (Keep), c's is set again: nothing of a is stale.
	track(t, s, "imp", "r5", store.Member{MemberKey: store.MemberKey{Kind: profile.User, ID: "a"}, Keep: true}, user("c", "plan"))
	wantStale(t, stale(t, s, "imp", "r5"), "user//c: r3c")
	settle(t, s, "imp", "r5")
	wantStale(t, stale(t, s, "imp", "r6"), "user//a: plan,r3only", "user//c: plan")
	// A refused row of a profile never owned keeps nothing.
	track(t, s, "imp", "r6", store.Member{MemberKey: store.MemberKey{Kind: profile.User, ID: "new"}, Keep: true})
	wantStale(t, stale(t, s, "imp", ""), "user//a: plan,r3only", "user//c: plan")

	// Settling with a run that tracked nothing forgets the import.
	settle(t, s, "imp", "")
	wantStale(t, stale(t, s, "imp", ""))
	wantStale(t, stale(t, s, "other", ""), "user//a: x")
}

// testMembersPaging: thousands of stale profiles stream in key order
// across pages, fn may write to the store meanwhile, and its error stops
// the stream.
func testMembersPaging(t *testing.T, h Harness) {
	hd := open(t, h)
	s := hd.s
	const n = 2500
	ms := make([]store.Member, n)
	for i := range ms {
		ms[i] = user(fmt.Sprintf("u%05d", n-i), "p") // reverse order on purpose
	}
	track(t, s, "imp", "r1", ms...)
	settle(t, s, "imp", "r1")
	ctx := context.Background()
	var ids []string
	err := s.StaleMembers(ctx, 1, "imp", "r2", func(m store.StaleMember) error {
		ids = append(ids, m.ID)
		u := profile.Update{Kind: profile.User, DistinctID: m.ID, Op: profile.OpUnset, Unset: m.Names, IgnoreTime: true}
		_, err := s.Write(ctx, []store.Batch{{Project: 1, Profiles: []store.ProfileUpdate{{Update: u}}}})
		return err
	})
	if err != nil {
		t.Fatalf("stale members: %v", err)
	}
	if len(ids) != n {
		t.Fatalf("streamed %d stale profiles, want %d", len(ids), n)
	}
	for i := range ids {
		if want := fmt.Sprintf("u%05d", i+1); ids[i] != want {
			t.Fatalf("stale profile %d is %s, want %s (key order)", i, ids[i], want)
		}
	}
	stop := errors.New("stop")
	calls := 0
	err = s.StaleMembers(ctx, 1, "imp", "r2", func(store.StaleMember) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("fn's error: got %v after %d calls, want stop after 1", err, calls)
	}
}

// testDeleteImportEvents: exactly the events whose top-level
// $warehouse_import_id is the import's go, their dedup keys are freed
// (the same events can be stored again), and a repeat deletes nothing.
func testDeleteImportEvents(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	mine := []store.Event{
		NewEvent(1, "e", "u1", 1000, "id-1", `{"$warehouse_import_id":"imp-1","n":1}`),
		NewEvent(1, "e", "u2", 2000, "id-2", `{"a":"x","$warehouse_import_id":"imp-1"}`),
		NewEvent(1, "e", "u3", 3000, "", `{"$warehouse_import_id":"imp-1"}`),
	}
	others := []store.Event{
		NewEvent(1, "e", "u4", 4000, "id-4", `{"$warehouse_import_id":"imp-2"}`),
		NewEvent(1, "e", "u5", 5000, "id-5", `{"nested":{"$warehouse_import_id":"imp-1"}}`),
		NewEvent(1, "e", "u6", 6000, "id-6", `{"$warehouse_import_id":"imp-10"}`),
		NewEvent(1, "e", "u7", 7000, "id-7", `{"x":"\"$warehouse_import_id\":\"imp-1\""}`),
	}
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: append(append([]store.Event(nil), mine...), others...)},
		store.Batch{Project: 2, Events: []store.Event{NewEvent(2, "e", "u1", 1000, "id-1", `{"$warehouse_import_id":"imp-1"}`)}})
	n, err := hd.s.DeleteImportEvents(ctx, 1, "imp-1")
	if err != nil || n != 3 {
		t.Fatalf("delete: %d, %v; want 3", n, err)
	}
	requireEvents(t, Collect(t, hd.s, all(1)), others)
	if got := Collect(t, hd.s, all(2)); len(got) != 1 {
		t.Fatalf("project 2 has %d events, want its 1 untouched", len(got))
	}
	if n, err := hd.s.DeleteImportEvents(ctx, 1, "imp-1"); err != nil || n != 0 {
		t.Fatalf("second delete: %d, %v; want 0", n, err)
	}
	// The keys are free: the same events are stored again, also after a restart.
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: mine[:2]}), 2, 0, 0)
	if n, err := hd.s.DeleteImportEvents(ctx, 1, "imp-1"); err != nil || n != 2 {
		t.Fatalf("third delete: %d, %v; want 2", n, err)
	}
	hd.reopen(t)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: mine}), 3, 0, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), append(append([]store.Event(nil), mine...), others...))
}
