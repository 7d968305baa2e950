package duckstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A write reads a profile's stored state only for projects whose rows the
// table may hold; those are the projects it held at Open and those the
// loader wrote since. Each case sets one property and then another, single
// updates (loadProfile) and batches (prefetchProfiles), and must find both:
// after the loader applied the first (its state no longer pending), and
// after a reopen.
func TestProfilesReadBackAfterApplyAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.duckdb")
	s, err := Open(ctx, path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	set := func(s *Store, project int64, prop string, ids ...string) {
		t.Helper()
		var ups []store.ProfileUpdate
		for i, id := range ids {
			u, err := profile.ParseUser(fmt.Appendf(nil, `{"$token":"t","$distinct_id":%q,"$set":{%q:1}}`, id, prop))
			if err != nil {
				t.Fatal(err)
			}
			ups = append(ups, store.ProfileUpdate{Update: u, Ref: i})
		}
		if _, err := s.Write(ctx, []store.Batch{{Project: project, Profiles: ups}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store, project int64, want []string, ids ...string) {
		t.Helper()
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]any{}
		err := s.ScanProfiles(ctx, store.ProfileScan{Project: project, Kind: profile.User}, func(p *store.StoredProfile) error {
			var m map[string]any
			if err := json.Unmarshal(p.Props, &m); err != nil {
				return err
			}
			got[p.ID] = m
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			for _, k := range want {
				if _, ok := got[id][k]; !ok {
					t.Fatalf("project %d, %s: %v; want %v set", project, id, got[id], want)
				}
			}
		}
	}
	if s.pending.mayHold(1) || s.pending.mayHold(2) {
		t.Fatal("a new store's table may hold profiles")
	}
	set(s, 1, "a", "one")
	set(s, 2, "a", "x", "y", "z")
	check(s, 1, []string{"a"}, "one")
	check(s, 2, []string{"a"}, "x", "y", "z")
	set(s, 1, "b", "one")         // applied, no longer pending: read from the table
	set(s, 2, "b", "x", "y", "z") // a batch: prefetched from the table
	check(s, 1, []string{"a", "b"}, "one")
	check(s, 2, []string{"a", "b"}, "x", "y", "z")
	if s.pending.mayHold(3) {
		t.Fatal("project 3 was never written")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set(s, 1, "c", "one")
	set(s, 2, "c", "x", "y", "z")
	check(s, 1, []string{"a", "b", "c"}, "one")
	check(s, 2, []string{"a", "b", "c"}, "x", "y", "z")
}
