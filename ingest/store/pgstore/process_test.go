package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// Two Stores on one schema have separate pools and caches: as far as the
// database can tell, two processes. These tests check the rules that must
// hold across processes, which the conformance suite (one store at a time)
// cannot see.

func openPair(t *testing.T) (a, b *testStore) {
	t.Helper()
	dsn, schema := testSchema(t)
	a = openTest(t, dsn, schema, defaultPages())
	b = openTest(t, dsn, schema, defaultPages())
	t.Cleanup(func() {
		if err := errors.Join(a.Close(), b.Close()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return a, b
}

func write(t *testing.T, s store.Store, batches ...store.Batch) store.WriteResult {
	t.Helper()
	res, err := s.Write(context.Background(), batches)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return res
}

func resolveID(t *testing.T, s store.Store, project int64, id string) string {
	t.Helper()
	c, err := s.Resolve(context.Background(), project, id)
	if err != nil {
		t.Fatalf("resolve %q: %v", id, err)
	}
	return c
}

// TestProcessesShareIdentityAndDedup: writers spread over two stores merge
// ids into one cluster, count on its profile and send the same events. No
// merge, profile update or event may be lost or doubled.
func TestProcessesShareIdentityAndDedup(t *testing.T) {
	a, b := openPair(t)
	if err := a.SetMode(context.Background(), 1, identity.Original); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 15
	evs := storetest.GenEvents(1, 300, 0)
	var mu sync.Mutex
	inserted := 0
	var wg sync.WaitGroup
	for g := range writers {
		s := store.Store(a)
		if g%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for i := range rounds {
				id := fmt.Sprintf("id-%d-%d", g, i)
				u, err := profile.ParseUser([]byte(`{"$token":"t","$distinct_id":"` + id + `","$add":{"n":1}}`))
				if err != nil {
					t.Error(err)
					return
				}
				res, err := s.Write(context.Background(), []store.Batch{{
					Project:  1,
					Merges:   []store.Merge{{DistinctIDs: [2]string{"root", id}, Props: []byte(`{}`)}},
					Events:   evs[i*20 : i*20+20],
					Profiles: []store.ProfileUpdate{{Update: u}},
				}})
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
				if res.Merges != 1 || res.Profiles != 1 || len(res.Rejected) != 0 {
					t.Errorf("writer %d round %d: %+v", g, i, res)
				}
				mu.Lock()
				inserted += res.Inserted
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if inserted != len(evs) {
		t.Fatalf("inserted %d events in all, want %d", inserted, len(evs))
	}
	for _, s := range []*testStore{a, b} {
		if got := storetest.Collect(t, s, store.Scan{Project: 1, FromMs: -1 << 62, ToMs: 1 << 62}); len(got) != len(evs) {
			t.Fatalf("stored %d events, want %d", len(got), len(evs))
		}
		for g := range writers {
			if c := resolveID(t, s, 1, fmt.Sprintf("id-%d-%d", g, rounds-1)); c != "root" {
				t.Fatalf("id-%d-%d resolves to %q, want root", g, rounds-1, c)
			}
		}
		var n float64
		err := s.ScanProfiles(context.Background(), store.ProfileScan{Project: 1, Kind: profile.User}, func(p *store.StoredProfile) error {
			var m map[string]any
			if err := json.Unmarshal(p.Props, &m); err != nil {
				return err
			}
			if p.ID != "root" {
				return fmt.Errorf("profile %q shown besides root: %s", p.ID, p.Props)
			}
			n, _ = m["n"].(float64)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != writers*rounds {
			t.Fatalf("root's counter is %v, want %d: profile updates were lost", n, writers*rounds)
		}
	}
	if got := len(merges(t, a.Store, 1)); got != writers*rounds {
		t.Fatalf("%d merges stored, want %d", got, writers*rounds)
	}
}

// TestCachedGraphCatchesUp: a store whose cached graph is behind another
// store's changes decides with the changes it missed.
func TestCachedGraphCatchesUp(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	if err := a.SetMode(ctx, 1, identity.Original); err != nil {
		t.Fatal(err)
	}
	m := func(x, y string) store.Merge { return store.Merge{DistinctIDs: [2]string{x, y}, Props: []byte(`{}`)} }
	write(t, a, store.Batch{Project: 1, Merges: []store.Merge{m("a", "b")}}) // a caches {a, b}
	write(t, b, store.Batch{Project: 1, Merges: []store.Merge{m("c", "b")}}) // b learns it, adds c
	write(t, a, store.Batch{Project: 1, Merges: []store.Merge{m("d", "c")}}) // a must know c joined a
	for _, id := range []string{"a", "b", "c", "d"} {
		if got := resolveID(t, b, 1, id); got != "a" {
			t.Fatalf("%s → %q, want a (first id of the cluster)", id, got)
		}
	}
	// The limit counts members a's cache has not seen.
	ms := make([]store.Merge, 0, identity.MaxClusterSize)
	for i := range identity.MaxClusterSize - 4 {
		ms = append(ms, m("a", fmt.Sprintf("x%d", i)))
	}
	if res := write(t, b, store.Batch{Project: 1, Merges: ms}); len(res.Rejected) != 0 {
		t.Fatalf("filling to the limit rejected %d merges", len(res.Rejected))
	}
	res := write(t, a, store.Batch{Project: 1, Merges: []store.Merge{m("a", "one-too-many")}})
	if len(res.Rejected) != 1 || !errors.Is(res.Rejected[0].Err, identity.ErrClusterFull) {
		t.Fatalf("merge over the limit from the other store: %+v", res)
	}
	// A mode set by one store reaches the other's cache (project 2 is empty).
	if err := b.SetMode(ctx, 2, identity.Original); err != nil {
		t.Fatal(err)
	}
	write(t, a, store.Batch{Project: 2, Merges: []store.Merge{m("p", "q")}})
	if got := resolveID(t, b, 2, "q"); got != "p" {
		t.Fatalf("project 2: q → %q, want p: the merge ran in Simplified mode", got)
	}
}

// TestFailedWriteForgetsIdentity: a write that fails after its changes were
// applied to the cached graph must not leave them there.
func TestFailedWriteForgetsIdentity(t *testing.T) {
	dsn, schema := testSchema(t)
	s := openTest(t, dsn, schema, defaultPages())
	defer s.Close()
	ctx := context.Background()
	if err := s.SetMode(ctx, 1, identity.Original); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL text cannot hold U+0000, so the event fails the write
	// after the merge was decided.
	bad := storetest.NewEvent(1, "bad\x00name", "u", 1, "i1", `{}`)
	_, err := s.Write(ctx, []store.Batch{{Project: 1,
		Merges: []store.Merge{{DistinctIDs: [2]string{"x", "y"}, Props: []byte(`{}`)}},
		Events: []store.Event{bad}}})
	if err == nil {
		t.Fatal("a write with U+0000 in an event name succeeded")
	}
	write(t, s, store.Batch{Project: 1, Merges: []store.Merge{{DistinctIDs: [2]string{"y", "z"}, Props: []byte(`{}`)}}})
	for id, want := range map[string]string{"x": "x", "y": "y", "z": "y"} {
		if got := resolveID(t, s, 1, id); got != want {
			t.Fatalf("%s → %q, want %q: the failed merge left a trace", id, got, want)
		}
	}
}

// TestConcurrentOpen: processes starting together migrate once.
func TestConcurrentOpen(t *testing.T) {
	dsn, schema := testSchema(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 6)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), dsn, Options{Schema: schema}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var n, max int
	err := stores[0].pool.QueryRow(context.Background(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &max)
	if err != nil || n != len(migrations) || max != len(migrations) {
		t.Fatalf("schema_migrations: %d rows up to %d (%v), want %d", n, max, err, len(migrations))
	}
}

// TestNewerSchemaRefused: a schema migrated by a newer build is not misread.
func TestNewerSchemaRefused(t *testing.T) {
	dsn, schema := testSchema(t)
	s := openTest(t, dsn, schema, defaultPages())
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO schema_migrations (version) VALUES ($1)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), dsn, Options{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "this build knows up to") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

// TestProcessesReplaceLookup: replacements of one table from two stores
// take turns; the table ends as one whole upload, never a mix.
func TestProcessesReplaceLookup(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g, s := range []*testStore{a, b} {
		wg.Go(func() {
			for i := range 10 {
				csv := "id,v\n"
				for k := range 50 + g*10 + i {
					csv += fmt.Sprintf("k%03d,%d\n", k, g)
				}
				tb, err := lookup.Parse(strings.NewReader(csv), lookup.Options{})
				if err != nil {
					t.Error(err)
					return
				}
				if err := s.ReplaceLookup(ctx, 1, "items", tb.Batches()); err != nil {
					t.Errorf("store %d, replacement %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	vals := map[string]int{}
	n := 0
	err := a.ScanLookup(ctx, 1, "items", func(key string, row []byte) error {
		var m map[string]any
		if err := json.Unmarshal(row, &m); err != nil {
			return err
		}
		vals[fmt.Sprint(m["v"])]++
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 1 || (n != 59 && n != 69) {
		t.Fatalf("table holds %d rows with values %v: not one whole upload", n, vals)
	}
}
