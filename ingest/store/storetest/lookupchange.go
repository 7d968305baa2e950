package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// testLookupChange: a change set upserts and deletes rows by key in
// place, creates a missing table, survives a restart, leaves other
// tables alone, and a failing change set leaves the table as it was.
func testLookupChange(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	lc, ok := hd.s.(store.LookupChanges)
	if !ok {
		t.Fatalf("%T does not implement store.LookupChanges", hd.s)
	}
	if err := lc.ChangeLookup(ctx, 1, "items", lookupTable(t, "id,price\na,1\nb,2\nc,3\n"), nil); err != nil {
		t.Fatal(err)
	}
	if err := hd.s.ReplaceLookup(ctx, 1, "other", lookupTable(t, "id,price\na,9\n")); err != nil {
		t.Fatal(err)
	}
	if err := lc.ChangeLookup(ctx, 1, "items", lookupTable(t, "id,price,size\nb,20,L\nd,4,\n"), []string{"c", "zz"}); err != nil {
		t.Fatal(err)
	}
	hd.reopen(t)
	lc = hd.s.(store.LookupChanges)
	want := map[string]string{"a": `{"id":"a","price":1}`, "b": `{"id":"b","price":20,"size":"L"}`, "d": `{"id":"d","price":4}`}
	got, err := lookupRows(t, hd.s, 1, "items")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if got, _ := lookupRows(t, hd.s, 1, "other"); len(got) != 1 {
		t.Fatalf("another table changed: %v", got)
	}
	// A change set whose rows fail midway applies nothing.
	if err := lc.ChangeLookup(ctx, 1, "items", &failingRows{lookupTable(t, "id,price\na,100\n")}, []string{"b"}); err == nil {
		t.Fatal("a failing change set succeeded")
	}
	if got, _ := lookupRows(t, hd.s, 1, "items"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a failed change: rows %v, want %v", got, want)
	}
}

// failingRows yields rows' first batch, then fails.
type failingRows struct{ rows store.LookupRows }

func (f *failingRows) Columns() []string { return f.rows.Columns() }

func (f *failingRows) Next() (*lookup.Batch, error) {
	if f.rows == nil {
		return nil, errors.New("storetest: the source failed")
	}
	b, err := f.rows.Next()
	f.rows = nil
	return b, err
}
