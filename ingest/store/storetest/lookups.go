package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

func lookupTable(t *testing.T, csv string) *lookup.TableBatches {
	t.Helper()
	tb, err := lookup.Parse(strings.NewReader(csv), lookup.Options{})
	if err != nil {
		t.Fatalf("parse lookup csv: %v", err)
	}
	return tb.Batches()
}

func lookupRows(t *testing.T, s store.Store, project int64, id string) (map[string]string, error) {
	t.Helper()
	out := map[string]string{}
	err := s.ScanLookup(context.Background(), project, id, func(key string, row []byte) error {
		out[key] = string(row)
		return nil
	})
	return out, err
}

// testLookupReplace: a replacement swaps the whole table, survives a
// restart, and tables are per project.
func testLookupReplace(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	if _, err := lookupRows(t, hd.s, 1, "items"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("never uploaded: %v, want ErrNotFound", err)
	}
	if err := hd.s.ReplaceLookup(ctx, 1, "items", lookupTable(t, "id,price,tags\na,9.5,\"[\"\"x\"\"]\"\nb,2,\n")); err != nil {
		t.Fatal(err)
	}
	if err := hd.s.ReplaceLookup(ctx, 1, "items", lookupTable(t, "id,price\nb,3\nc,4\nd,x\x00y\n")); err != nil {
		t.Fatal(err)
	}
	hd.reopen(t)
	got, err := lookupRows(t, hd.s, 1, "items")
	if err != nil {
		t.Fatal(err)
	}
	// d's cell holds a NUL: the row is JSON, so it is escaped (keys with one
	// are refused by lookup.Parse).
	want := map[string]string{"b": `{"id":"b","price":3}`, "c": `{"id":"c","price":4}`, "d": `{"id":"d","price":"x\u0000y"}`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if _, err := lookupRows(t, hd.s, 2, "items"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("project 2 sees project 1's table: %v", err)
	}
}
