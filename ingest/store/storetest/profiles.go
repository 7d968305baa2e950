package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// userUpdate parses an /engage update object, as the API does.
func userUpdate(t *testing.T, ref int, js string) store.ProfileUpdate {
	t.Helper()
	u, err := profile.ParseUser([]byte(js))
	if err != nil {
		t.Fatalf("parse %s: %v", js, err)
	}
	return store.ProfileUpdate{Update: u, Ref: ref}
}

func groupUpdate(t *testing.T, ref int, js string) store.ProfileUpdate {
	t.Helper()
	u, err := profile.ParseGroup([]byte(js))
	if err != nil {
		t.Fatalf("parse %s: %v", js, err)
	}
	return store.ProfileUpdate{Update: u, Ref: ref}
}

// profiles reads the profiles q selects as id → properties ($last_seen dropped).
func profiles(t *testing.T, s store.Store, q store.ProfileScan) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	err := s.ScanProfiles(context.Background(), q, func(p *store.StoredProfile) error {
		var m map[string]any
		if err := json.Unmarshal(p.Props, &m); err != nil {
			return err
		}
		delete(m, profile.LastSeen)
		out[p.ID] = m
		return nil
	})
	if err != nil {
		t.Fatalf("scan profiles: %v", err)
	}
	return out
}

func users(project int64) store.ProfileScan {
	return store.ProfileScan{Project: project, Kind: profile.User}
}

// testProfileOperators applies every operator in order, within one write
// and across writes, and checks the result before and after a restart.
func testProfileOperators(t *testing.T, h Harness) {
	hd := open(t, h)
	up := func(i int, op string) store.ProfileUpdate {
		return userUpdate(t, i, `{"$token":"t","$distinct_id":"u1",`+op+`}`)
	}
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: []store.ProfileUpdate{
		up(0, `"$set":{"name":"Ada","plan":"free","gone":1}`),
		up(1, `"$set_once":{"name":"Bob","first":"2024"}`),
		up(2, `"$add":{"visits":2,"score":-1.5}`),
		up(3, `"$union":{"tags":["a","b"]}`),
	}})
	if res.Profiles != 4 || len(res.Rejected) != 0 {
		t.Fatalf("first write %+v", res)
	}
	mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: []store.ProfileUpdate{
		up(0, `"$union":{"tags":["b","c"]}`),
		up(1, `"$append":{"log":"x"}`),
		up(2, `"$remove":{"tags":"a"}`),
		up(3, `"$remove":{"tags":"never-there"}`),
		up(4, `"$add":{"visits":1,"new_counter":5}`),
		up(5, `"$unset":["gone"]`),
		up(6, `"$set":{"plan":"pro"}`),
	}})
	// A profile deleted and then set starts from nothing.
	mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: []store.ProfileUpdate{
		userUpdate(t, 0, `{"$token":"t","$distinct_id":"u2","$set":{"a":1}}`),
		userUpdate(t, 1, `{"$token":"t","$distinct_id":"u2","$delete":""}`),
		userUpdate(t, 2, `{"$token":"t","$distinct_id":"u2","$set":{"b":2}}`),
		userUpdate(t, 3, `{"$token":"t","$distinct_id":"u3","$set":{"c":3}}`),
		userUpdate(t, 4, `{"$token":"t","$distinct_id":"u3","$delete":null}`),
		userUpdate(t, 5, `{"$token":"t","$distinct_id":"u4","$unset":["x"]}`), // creates nothing
	}})
	want := map[string]map[string]any{
		"u1": {"name": "Ada", "plan": "pro", "first": "2024", "visits": 3.0, "score": -1.5,
			"tags": []any{"b", "c"}, "log": []any{"x"}, "new_counter": 5.0},
		"u2": {"b": 2.0},
	}
	for _, when := range []string{"before restart", "after restart"} {
		if got := profiles(t, hd.s, users(1)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: profiles\n got %v\nwant %v", when, got, want)
		}
		if when == "before restart" {
			hd.reopen(t)
		}
	}
	if got := profiles(t, hd.s, store.ProfileScan{Project: 1, Kind: profile.User, IDs: []string{"u2", "nobody"}}); len(got) != 1 || got["u2"] == nil {
		t.Fatalf("scan by id: %v, want only u2", got)
	}
	if got := profiles(t, hd.s, users(2)); len(got) != 0 {
		t.Fatalf("project 2 sees %v", got)
	}
}

// testGroupProfiles: groups are keyed by (group key, group id) and refuse
// $add; a refused update stores nothing and the rest of the write stands.
func testGroupProfiles(t *testing.T, h Harness) {
	hd := open(t, h)
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: []store.ProfileUpdate{
		groupUpdate(t, 0, `{"$token":"t","$group_key":"company","$group_id":"acme","$set":{"size":10}}`),
		// The parser refuses $add on groups already; the store must too.
		{Ref: 1, Update: profile.Update{Kind: profile.Group, GroupKey: "company", GroupID: "acme", Op: profile.OpAdd,
			Props: []profile.Property{{Name: "size", Value: []byte("1")}}}},
		groupUpdate(t, 2, `{"$token":"t","$group_key":"team","$group_id":"acme","$set":{"size":3}}`),
	}})
	if res.Profiles != 2 || len(res.Rejected) != 1 || res.Rejected[0].Ref != 1 || !errors.Is(res.Rejected[0].Err, profile.ErrUnsupported) {
		t.Fatalf("result %+v, want ref 1 rejected with ErrUnsupported", res)
	}
	got := profiles(t, hd.s, store.ProfileScan{Project: 1, Kind: profile.Group, GroupKey: "company"})
	if !reflect.DeepEqual(got, map[string]map[string]any{"acme": {"size": 10.0}}) {
		t.Fatalf("company groups %v", got)
	}
	if got := profiles(t, hd.s, users(1)); len(got) != 0 {
		t.Fatalf("group updates made user profiles %v", got)
	}
}

// testProfilesManyInOneWrite: hundreds of stored profiles updated in one
// write (a store may read them ahead in bulk), beside new ones and a
// group that shares a user's id.
func testProfilesManyInOneWrite(t *testing.T, h Harness) {
	hd := open(t, h)
	const stored, added = 600, 100
	var first, second []store.ProfileUpdate
	for i := range stored {
		first = append(first, userUpdate(t, i, fmt.Sprintf(`{"$token":"t","$distinct_id":"u-%d","$set":{"n":1}}`, i)))
	}
	first = append(first, groupUpdate(t, stored, `{"$token":"t","$group_key":"company","$group_id":"u-7","$set":{"g":1}}`))
	mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: first})
	if got := profiles(t, hd.s, users(1)); len(got) != stored { // also waits until they are in the tables
		t.Fatalf("%d user profiles after the first write, want %d", len(got), stored)
	}
	for i := range stored + added {
		second = append(second, userUpdate(t, i, fmt.Sprintf(`{"$token":"t","$distinct_id":"u-%d","$add":{"n":2}}`, i)))
	}
	second = append(second, groupUpdate(t, stored+added, `{"$token":"t","$group_key":"company","$group_id":"u-7","$set":{"h":2}}`))
	if res := mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: second}); res.Profiles != stored+added+1 {
		t.Fatalf("second write: %+v", res)
	}
	got := profiles(t, hd.s, users(1))
	for i := range stored + added {
		want := 2.0
		if i < stored {
			want = 3
		}
		if p := got[fmt.Sprintf("u-%d", i)]; !reflect.DeepEqual(p, map[string]any{"n": want}) {
			t.Fatalf("user u-%d: %v, want n=%v", i, p, want)
		}
	}
	groups := profiles(t, hd.s, store.ProfileScan{Project: 1, Kind: profile.Group, GroupKey: "company"})
	if !reflect.DeepEqual(groups, map[string]map[string]any{"u-7": {"g": 1.0, "h": 2.0}}) {
		t.Fatalf("groups %v", groups)
	}
}

// testProfilesFollowIdentity: in Original mode updates go to the canonical
// id unless $ignore_alias, and a merge folds the profiles of both ids into
// the canonical one, whose own values win.
func testProfilesFollowIdentity(t *testing.T, h Harness) {
	hd := open(t, h)
	setMode(t, hd.s, 1, identity.Original)
	mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: []store.ProfileUpdate{
		userUpdate(t, 0, `{"$token":"t","$distinct_id":"user","$set":{"name":"Ada","plan":"pro"}}`),
		userUpdate(t, 1, `{"$token":"t","$distinct_id":"anon-7","$set":{"plan":"free","utm":"ad"}}`),
	}})
	mustWrite(t, hd.s, store.Batch{Project: 1, Merges: []store.Merge{merge("user", "anon-7")}})
	mustWrite(t, hd.s, store.Batch{Project: 1, Profiles: []store.ProfileUpdate{
		userUpdate(t, 0, `{"$token":"t","$distinct_id":"anon-7","$set":{"seen":true}}`),
		userUpdate(t, 1, `{"$token":"t","$distinct_id":"anon-7","$ignore_alias":true,"$set":{"literal":1}}`),
	}})
	hd.reopen(t)
	got := profiles(t, hd.s, users(1))
	want := map[string]any{"name": "Ada", "plan": "pro", "utm": "ad", "seen": true}
	if !reflect.DeepEqual(got["user"], want) {
		t.Fatalf("canonical profile %v, want %v", got["user"], want)
	}
	// The literal "anon-7" profile exists but is not canonical: reads hide it.
	if _, ok := got["anon-7"]; ok {
		t.Fatalf("non-canonical profile shown: %v", got)
	}
}
