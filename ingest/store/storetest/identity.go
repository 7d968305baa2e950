package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

func setMode(t *testing.T, s store.Store, project int64, m identity.Mode) {
	t.Helper()
	if err := s.SetMode(context.Background(), project, m); err != nil {
		t.Fatalf("set mode %v: %v", m, err)
	}
}

func resolve(t *testing.T, s store.Store, project int64, id string) string {
	t.Helper()
	c, err := s.Resolve(context.Background(), project, id)
	if err != nil {
		t.Fatalf("resolve %q: %v", id, err)
	}
	return c
}

func merge(a, b string) store.Merge {
	return store.Merge{DistinctIDs: [2]string{a, b}, Props: []byte(`{}`)}
}

// distinctIDs scans a project with identity resolution and returns the
// distinct_id of each event by insert id.
func distinctIDs(t *testing.T, s store.Store, project int64) map[string]string {
	t.Helper()
	q := all(project)
	q.Resolve = true
	out := map[string]string{}
	for _, e := range Collect(t, s, q) {
		out[e.InsertID] = e.DistinctID
	}
	return out
}

// testOriginalMerge: a $merge joins two clusters, applies to events stored
// before it, and survives a restart.
func testOriginalMerge(t *testing.T, h Harness) {
	hd := open(t, h)
	setMode(t, hd.s, 1, identity.Original)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{
		NewEvent(1, "e", "anon-1", 1000, "i1", `{}`),
		NewEvent(1, "e", "user-1", 2000, "i2", `{}`),
	}})
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Merges: []store.Merge{merge("user-1", "anon-1")}})
	if res.Changes != 0 || res.Merges != 1 || len(res.Rejected) != 0 {
		t.Fatalf("merge result %+v", res)
	}
	check := func(when string) {
		c := resolve(t, hd.s, 1, "anon-1")
		if c != resolve(t, hd.s, 1, "user-1") || c != "user-1" {
			t.Fatalf("%s: anon-1 → %q, user-1 → %q; want both user-1 (first id of the merge)", when, c, resolve(t, hd.s, 1, "user-1"))
		}
		ids := distinctIDs(t, hd.s, 1)
		if ids["i1"] != "user-1" || ids["i2"] != "user-1" {
			t.Fatalf("%s: resolved events %v, want both user-1", when, ids)
		}
		if got := resolve(t, hd.s, 2, "anon-1"); got != "anon-1" {
			t.Fatalf("%s: project 2 resolves anon-1 to %q: identity leaks across projects", when, got)
		}
	}
	check("before restart")
	hd.reopen(t)
	check("after restart")
}

// testClusterLimit: a merge that would make a cluster of more than 500 ids
// is rejected and changes nothing; so is an alias, whose event is dropped.
func testClusterLimit(t *testing.T, h Harness) {
	hd := open(t, h)
	setMode(t, hd.s, 1, identity.Original)
	ms := make([]store.Merge, 0, identity.MaxClusterSize-1)
	for i := 1; i < identity.MaxClusterSize; i++ {
		ms = append(ms, merge("root", fmt.Sprintf("id-%d", i)))
	}
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Merges: ms})
	if res.Merges != len(ms) || len(res.Rejected) != 0 {
		t.Fatalf("filling the cluster: %d merges, %d rejected", res.Merges, len(res.Rejected))
	}
	over := merge("root", "one-too-many")
	over.Ref = 7
	res = mustWrite(t, hd.s, store.Batch{Project: 1, Merges: []store.Merge{over}})
	if res.Merges != 0 || len(res.Rejected) != 1 || res.Rejected[0].Ref != 7 || !errors.Is(res.Rejected[0].Err, identity.ErrClusterFull) {
		t.Fatalf("over the limit: %+v, want one rejection (ref 7) wrapping ErrClusterFull", res)
	}
	alias := store.Change{Change: identity.Change{Kind: identity.KindAlias, A: "alias-x", B: "id-3"}, Event: 1, Ref: 3}
	res = mustWrite(t, hd.s, store.Batch{Project: 1, Changes: []store.Change{alias}, Events: []store.Event{
		NewEvent(1, "kept", "someone", 10, "k1", `{}`),
		NewEvent(1, "$create_alias", "id-3", 11, "k2", `{}`),
	}})
	if res.Inserted != 1 || len(res.Rejected) != 1 || res.Rejected[0].Ref != 3 {
		t.Fatalf("alias over the limit: %+v, want the other event stored and the alias rejected", res)
	}
	hd.reopen(t)
	if got := resolve(t, hd.s, 1, "one-too-many"); got != "one-too-many" {
		t.Fatalf("rejected merge took effect: one-too-many → %q", got)
	}
	if got := resolve(t, hd.s, 1, "id-499"); got != "root" {
		t.Fatalf("id-499 → %q, want root", got)
	}
	if evs := Collect(t, hd.s, all(1)); len(evs) != 1 || evs[0].Name != "kept" {
		t.Fatalf("stored %d events, want only the one without a rejected change", len(evs))
	}
}

// testSimplifiedLink: the first event with both ids links the device to the
// user, retroactively; $merge has no effect in Simplified mode.
func testSimplifiedLink(t *testing.T, h Harness) {
	hd := open(t, h)
	setMode(t, hd.s, 1, identity.Simplified)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{
		NewEvent(1, "e", "$device:d1", 1000, "i1", `{}`),
	}, Merges: []store.Merge{merge("x", "y")}})
	link := store.Change{Change: identity.Change{Kind: identity.KindLink, A: "u1", B: "d1"}, Event: 0}
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Changes: []store.Change{link}, Events: []store.Event{
		NewEvent(1, "e", "u1", 2000, "i2", `{}`),
	}})
	if res.Changes != 1 || res.Inserted != 1 {
		t.Fatalf("link result %+v", res)
	}
	hd.reopen(t)
	if ids := distinctIDs(t, hd.s, 1); ids["i1"] != "u1" || ids["i2"] != "u1" {
		t.Fatalf("resolved events %v, want both u1", ids)
	}
	if got := resolve(t, hd.s, 1, "x"); got != "x" {
		t.Fatalf("$merge took effect in Simplified mode: x → %q", got)
	}
	// A second user for the same device: the device keeps its first link.
	mustWrite(t, hd.s, store.Batch{Project: 1, Changes: []store.Change{{Change: identity.Change{Kind: identity.KindLink, A: "u2", B: "d1"}, Event: -1}}})
	if got := resolve(t, hd.s, 1, "$device:d1"); got != "u1" {
		t.Fatalf("$device:d1 → %q after a second user, want u1", got)
	}
}

// testModeChange: the mode may change while a project is empty, never after.
func testModeChange(t *testing.T, h Harness) {
	hd := open(t, h)
	setMode(t, hd.s, 1, identity.Original)
	setMode(t, hd.s, 1, identity.Simplified) // still empty
	setMode(t, hd.s, 1, identity.Original)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: GenEvents(1, 1, 0)})
	setMode(t, hd.s, 1, identity.Original) // the same mode is fine
	hd.reopen(t)
	err := hd.s.SetMode(context.Background(), 1, identity.Simplified)
	if !errors.Is(err, store.ErrModeChange) {
		t.Fatalf("mode change of a project with data: %v, want ErrModeChange", err)
	}
	// The stored mode is still Original: $merge works.
	mustWrite(t, hd.s, store.Batch{Project: 1, Merges: []store.Merge{merge("a", "b")}})
	if got := resolve(t, hd.s, 1, "b"); got != "a" {
		t.Fatalf("b → %q, want a: the project left Original mode", got)
	}
	setMode(t, hd.s, 2, identity.Original) // other projects are unaffected
}
