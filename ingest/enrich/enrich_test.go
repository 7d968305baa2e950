package enrich

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// countingLookups is the real store, counting table loads to show caching.
type countingLookups struct {
	store.Lookups
	loads atomic.Int64
}

func (c *countingLookups) ScanLookup(ctx context.Context, project int64, id string, fn func(string, []byte) error) error {
	c.loads.Add(1)
	return c.Lookups.ScanLookup(ctx, project, id, fn)
}

func setup(t *testing.T) (*duckstore.Store, *countingLookups, *Enricher) {
	t.Helper()
	st, err := duckstore.Open(context.Background(), filepath.Join(t.TempDir(), "db", "t.duckdb"), duckstore.Options{Threads: 1, MemoryLimit: "256MB"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c := &countingLookups{Lookups: st}
	return st, c, New(c, nil)
}

func replace(t *testing.T, st *duckstore.Store, id, csv string) {
	t.Helper()
	tab, err := lookup.Parse(strings.NewReader(csv), lookup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReplaceLookup(context.Background(), 1, id, tab.Batches()); err != nil {
		t.Fatal(err)
	}
}

var project = &config.Project{ID: 1, LookupTables: []config.LookupTable{
	{ID: "items", Property: "item_id"},
	{ID: "items2", Property: "item_id", MapsTo: "event"},
	{ID: "plans", Property: "plan", MapsTo: "user"},
	{ID: "missing", Property: "sku"},
}}

func TestApply(t *testing.T) {
	st, _, e := setup(t)
	replace(t, st, "items", "id,price,name\nsku-1,9.5,\"Big \"\"Box\"\"\"\n42,1,answer\nsku-3,,only-name\n")
	replace(t, st, "items2", "id,price,color\nsku-1,1000,red\n")
	replace(t, st, "plans", "plan,seats\npro,10\n")
	a, err := e.For(context.Background(), project, Events)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{`{"item_id":"sku-1"}`, `{"item_id":"sku-1","item_id.price":9.5,"item_id.name":"Big \"Box\"","item_id.color":"red"}`},
		{`{"item_id":42,"n":1}`, `{"item_id":42,"n":1,"item_id.price":1,"item_id.name":"answer"}`},
		{`{"item_id":42.0}`, `{"item_id":42.0}`}, // a number matches by its text
		{`{"item_id":"sku-3"}`, `{"item_id":"sku-3","item_id.name":"only-name"}`},
		{`{"item_id":"sku-1","item_id.price":0}`, `{"item_id":"sku-1","item_id.price":0,"item_id.name":"Big \"Box\"","item_id.color":"red"}`},
		{`{"item_id":"nope"}`, `{"item_id":"nope"}`},
		{`{"item_id":["sku-1"]}`, `{"item_id":["sku-1"]}`},
		{`{"plan":"pro"}`, `{"plan":"pro"}`}, // a user table does not touch events
		{`{}`, `{}`},
		{`not json`, `not json`},
	}
	for _, c := range cases {
		if got := string(a.Apply([]byte(c.in))); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	u, err := e.For(context.Background(), project, Users)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(u.Apply([]byte(`{"plan":"pro","item_id":"sku-1"}`))); got != `{"plan":"pro","item_id":"sku-1","plan.seats":10}` {
		t.Errorf("user table: %s", got)
	}
	var nilE *Enricher
	if a, err := nilE.For(context.Background(), project, Events); err != nil || !a.Empty() {
		t.Errorf("nil Enricher: %v %v", a, err)
	}
}

func TestCacheAndInvalidate(t *testing.T) {
	st, counter, e := setup(t)
	replace(t, st, "items", "id,price\nsku-1,1\n")
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := e.For(ctx, project, Events)
			if err != nil {
				t.Error(err)
				return
			}
			if got := string(a.Apply([]byte(`{"item_id":"sku-1"}`))); got != `{"item_id":"sku-1","item_id.price":1}` {
				t.Errorf("got %s", got)
			}
		}()
	}
	wg.Wait()
	if n := counter.loads.Load(); n != 3 { // items, items2 and missing, once each
		t.Errorf("%d table loads for 8 concurrent readers, want 3", n)
	}
	replace(t, st, "items", "id,price\nsku-1,2\n")
	a, _ := e.For(ctx, project, Events)
	if got := string(a.Apply([]byte(`{"item_id":"sku-1"}`))); got != `{"item_id":"sku-1","item_id.price":1}` {
		t.Errorf("before Invalidate the cached table applies: %s", got)
	}
	e.Invalidate(1, "items")
	a, _ = e.For(ctx, project, Events)
	if got := string(a.Apply([]byte(`{"item_id":"sku-1"}`))); got != `{"item_id":"sku-1","item_id.price":2}` {
		t.Errorf("after Invalidate: %s", got)
	}
	if n := counter.loads.Load(); n != 4 {
		t.Errorf("%d loads, want 4 (one reload)", n)
	}
}

func TestApplyDoesNotAllocate(t *testing.T) {
	st, _, e := setup(t)
	replace(t, st, "items", "id,price,name\nsku-1,9.5,box\n")
	a, err := e.For(context.Background(), project, Events)
	if err != nil {
		t.Fatal(err)
	}
	hit, miss := []byte(`{"item_id":"sku-1","n":3}`), []byte(`{"item_id":42,"n":3}`)
	if n := testing.AllocsPerRun(100, func() {
		a.Apply(hit)
		a.Apply(miss)
	}); n != 0 {
		t.Errorf("%.0f allocations per call", n)
	}
}
