package run

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// A Mirror lookup table keyed (for the diff) by id but looked up by sku:
// a row whose sku changes leaves its old sku, a sku passing from a
// deleted row to a new one in one run stays, and after every run the
// table holds the source's rows exactly. Of two rows changed in one run
// with one sku the second is refused and the first kept.
func TestMirrorLookupKeyMoves(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newMirrorFixture(t, st,
				"id: lk\nimport_type: lookup_table\ntable_params: {table: skus}\nlookup_table_id: skus\nproperty_key_column_name: sku\n",
				`CREATE TABLE skus (id BIGINT PRIMARY KEY, sku VARCHAR, title VARCHAR)`,
				`INSERT INTO skus VALUES (1, 'a', 'Apple'), (2, 'b', 'Banana')`)
			// stored returns the table's rows as sku → "id title".
			stored := func() map[string]string {
				out := map[string]string{}
				if err := st.ScanLookup(context.Background(), 1, "skus", func(k string, row []byte) error {
					var r struct {
						ID    json.Number `json:"id"`
						Title string      `json:"title"`
					}
					if err := json.Unmarshal(row, &r); err != nil {
						return err
					}
					out[k] = r.ID.String() + " " + r.Title
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			same := func(step string) {
				t.Helper()
				want := map[string]string{}
				for _, r := range f.query(`SELECT CAST(id AS VARCHAR) AS id, sku, title FROM skus`) {
					want[r["sku"]] = r["id"] + " " + r["title"]
				}
				if got := stored(); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: lookup table\ngot  %v\nwant %v (the source)", step, got, want)
				}
			}
			f.sync("first", 2, 0, 0)
			same("first")
			f.exec(`UPDATE skus SET sku = 'c' WHERE id = 1`)
			f.sync("sku changed", 0, 1, 0)
			same("sku changed")
			f.exec(`DELETE FROM skus WHERE id = 2`, `INSERT INTO skus VALUES (3, 'b', 'Blueberry')`)
			f.sync("sku moved to a new row", 1, 0, 1)
			same("sku moved to a new row")
			// Two rows trade skus in one run: neither is deleted.
			f.exec(`UPDATE skus SET sku = CASE id WHEN 1 THEN 'b' ELSE 'c' END, title = title || '!'`)
			f.sync("skus traded", 0, 2, 0)
			same("skus traded")
			f.sync("unchanged", 0, 0, 0)
			same("unchanged")
			// Two rows changed in one run with one sku: the second read is
			// refused, the first kept, and the refused row's old sku stays.
			f.exec(`INSERT INTO skus VALUES (4, 'd', 'Date')`)
			f.sync("d", 1, 0, 0)
			f.exec(`UPDATE skus SET sku = 'z', title = 'Zest' WHERE id IN (1, 4)`)
			s := f.sync("duplicate sku", 0, 2, 0)
			if s.Failed != 1 {
				t.Fatalf("duplicate sku: %d rows failed, want 1", s.Failed)
			}
			got := stored()
			if len(got) != 3 || got["c"] != "3 Blueberry!" || got["z"] != "1 Zest" && got["z"] != "4 Zest" ||
				(got["z"] == "1 Zest") != (got["d"] == "4 Date") || (got["z"] == "4 Zest") != (got["b"] == "1 Apple!") {
				t.Fatalf("duplicate sku: lookup table %v", got)
			}
			f.exec(`DELETE FROM skus`)
			f.sync("emptied", 0, 0, 3)
			if got := stored(); len(got) != 0 {
				t.Fatalf("emptied: lookup table %v", got)
			}
		})
	}
}

// A run whose lookup change failed (as a crash before it would) after it
// recorded a row's new lookup key still removes the old key when the
// next run repeats the change.
func TestMirrorLookupKeyMovesAfterFailure(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			fs := &failLookupChange{Store: st, Mirrors: st.(store.Mirrors)}
			f := newMirrorFixture(t, fs,
				"id: lk\nimport_type: lookup_table\ntable_params: {table: skus}\nlookup_table_id: skus\nproperty_key_column_name: sku\n",
				`CREATE TABLE skus (id BIGINT PRIMARY KEY, sku VARCHAR, title VARCHAR)`,
				`INSERT INTO skus VALUES (1, 'a', 'Apple'), (2, 'b', 'Banana')`)
			keys := func() []string {
				var out []string
				if err := st.ScanLookup(context.Background(), 1, "skus", func(k string, _ []byte) error {
					out = append(out, k)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				slices.Sort(out)
				return out
			}
			f.sync("first", 2, 0, 0)
			f.exec(`UPDATE skus SET sku = 'c' WHERE id = 1`)
			for _, fail := range []bool{true, true, false} {
				fs.fail = fail
				if _, err := f.run(); (err != nil) != fail {
					t.Fatalf("run with failing lookup change %v: error %v", fail, err)
				}
			}
			if got := keys(); !slices.Equal(got, []string{"b", "c"}) {
				t.Fatalf("after the failures: keys %v, want [b c]", got)
			}
			// Settled, the old key is forgotten: a row taking it keeps it
			// when the first row changes again.
			f.exec(`INSERT INTO skus VALUES (3, 'a', 'Apricot')`)
			f.sync("a again", 1, 0, 0)
			f.exec(`UPDATE skus SET title = 'Cherry' WHERE id = 1`)
			f.sync("c retitled", 0, 1, 0)
			if got := keys(); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Fatalf("keys %v, want [a b c]", got)
			}
		})
	}
}
