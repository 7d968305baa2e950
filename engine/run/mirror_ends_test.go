package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// profileProps returns every user profile's properties (without $ ones).
func profileProps(t *testing.T, st store.Store) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	err := st.ScanProfiles(context.Background(), store.ProfileScan{Project: 1, Kind: profile.User}, func(p *store.StoredProfile) error {
		var m map[string]any
		if err := json.Unmarshal(p.Props, &m); err != nil {
			return err
		}
		for k := range m {
			if k[0] == '$' {
				delete(m, k)
			}
		}
		out[p.ID] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A deleted row unsets what its JSON column set as well as the table's
// columns; an update unsets the JSON names its new version dropped.
// Properties set by anything else stay.
func TestMirrorPeopleJSONProperties(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newMirrorFixture(t, st,
				"id: ppl\nimport_type: people\ntable_params: {table: users}\nuser_column_name: uid\njson_properties_column_name: props\n",
				`CREATE TABLE users (uid VARCHAR PRIMARY KEY, plan VARCHAR, props JSON)`,
				`INSERT INTO users VALUES ('u1', 'free', '{"a": 1, "b": "x"}'), ('u2', 'pro', '{"c": true}')`)
			f.sync("first", 2, 0, 0)
			by := profile.Update{Kind: profile.User, DistinctID: "u2", Op: profile.OpSet, IgnoreTime: true,
				Props: []profile.Property{{Name: "note", Value: []byte(`"by hand"`)}}}
			if _, err := st.Write(context.Background(), []store.Batch{{Project: 1, Source: store.SourceOther, Profiles: []store.ProfileUpdate{{Update: by}}}}); err != nil {
				t.Fatal(err)
			}
			f.exec(`UPDATE users SET props = '{"a": 2}' WHERE uid = 'u1'`, `DELETE FROM users WHERE uid = 'u2'`)
			f.sync("changes", 0, 1, 1)
			want := map[string]map[string]any{
				"u1": {"plan": "free", "a": 2.0},
				"u2": {"note": "by hand"},
			}
			if got := profileProps(t, st); !reflect.DeepEqual(got, want) {
				t.Fatalf("profiles\ngot  %v\nwant %v", got, want)
			}
			f.exec(`DELETE FROM users`)
			f.sync("emptied", 0, 0, 1)
			want["u1"] = map[string]any{}
			if got := profileProps(t, st); !reflect.DeepEqual(got, want) {
				t.Fatalf("emptied: profiles\ngot  %v\nwant %v", got, want)
			}
		})
	}
}

func TestProfileRef(t *testing.T) {
	for _, tc := range []struct {
		id    string
		names []string
	}{{"u1", nil}, {"u1", []string{"a"}}, {"", []string{"a", "b c"}}} {
		id, names := parseProfileRef(profileRef(tc.id, tc.names))
		if id != tc.id || !reflect.DeepEqual(names, tc.names) {
			t.Fatalf("%q %q: parsed %q %q", tc.id, tc.names, id, names)
		}
	}
}

// failLookupChange is a store whose next lookup change fails.
type failLookupChange struct {
	store.Store
	store.Mirrors
	fail bool
}

func (s *failLookupChange) ChangeLookup(ctx context.Context, project int64, id string, rows store.LookupRows, del []string) error {
	if s.fail {
		s.fail = false
		return errors.New("injected failure")
	}
	return s.Store.(store.LookupChanges).ChangeLookup(ctx, project, id, rows, del)
}

// A Mirror lookup table changes in place: rows it did not change stay as
// they are (a row uploaded by hand under the same table survives), and a
// run whose change failed leaves its rows pending, so the next run applies
// them.
func TestMirrorLookupInPlace(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			fs := &failLookupChange{Store: st, Mirrors: st.(store.Mirrors)}
			f := newMirrorFixture(t, fs,
				"id: lk\nimport_type: lookup_table\ntable_params: {table: skus}\nlookup_table_id: skus\nproperty_key_column_name: sku\n",
				`CREATE TABLE skus (sku VARCHAR, title VARCHAR)`,
				`INSERT INTO skus VALUES ('a', 'Apple'), ('b', 'Banana'), ('c', 'Cherry')`)
			rows := func() map[string]string {
				out := map[string]string{}
				if err := st.ScanLookup(context.Background(), 1, "skus", func(k string, row []byte) error {
					out[k] = string(row)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			f.sync("first", 3, 0, 0)
			// Another writer's row: a replacement would drop it.
			if err := st.(store.LookupChanges).ChangeLookup(context.Background(), 1, "skus",
				lookupRowsOf(t, "sku,title\nzz,Other\n"), nil); err != nil {
				t.Fatal(err)
			}
			f.exec(`UPDATE skus SET title = 'Apricot' WHERE sku = 'a'`, `DELETE FROM skus WHERE sku = 'b'`, `INSERT INTO skus VALUES ('d', 'Date')`)
			fs.fail = true
			if _, err := f.run(); err == nil {
				t.Fatal("the run succeeded though its lookup change failed")
			}
			if got := rows(); len(got) != 4 || !strings.Contains(got["a"], "Apple") {
				t.Fatalf("a failed run changed the table: %v", got)
			}
			f.sync("after the failure", 0, 2, 1) // d was recorded, pending: an update
			want := map[string]string{"a": `{"sku":"a","title":"Apricot"}`, "c": `{"sku":"c","title":"Cherry"}`,
				"d": `{"sku":"d","title":"Date"}`, "zz": `{"sku":"zz","title":"Other"}`}
			if got := rows(); !reflect.DeepEqual(got, want) {
				t.Fatalf("rows\ngot  %v\nwant %v", got, want)
			}
			f.sync("unchanged", 0, 0, 0)
			f.exec(`DELETE FROM skus`)
			f.sync("emptied", 0, 0, 3)
			if got := rows(); !reflect.DeepEqual(got, map[string]string{"zz": want["zz"]}) {
				t.Fatalf("emptied: rows %v", got)
			}
		})
	}
}

func lookupRowsOf(t *testing.T, csv string) store.LookupRows {
	t.Helper()
	tb, err := lookup.Parse(strings.NewReader(csv), lookup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tb.Batches()
}

// A Mirror run asked to count has a total for its progress and ETA: the
// source's count, as for other runs.
func TestMirrorProgressTotal(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newMirrorFixture(t, st,
				"id: ev\nimport_type: event_stream\ntable_params: {table: ev}\nuser_column_name: uid\ntime_column_name: ts\nevent_name: e\nkey_columns: [uid]\n",
				`CREATE TABLE ev (uid VARCHAR, ts TIMESTAMP)`,
				`INSERT INTO ev SELECT 'u' || i, TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND FROM range(5) t(i)`)
			for round, want := range []int64{5, 6, 7} {
				var last Stats
				r := &Runner{Registry: kinds.Registry(), Store: st}
				s, err := r.Run(context.Background(), f.im, importspec.Project{ID: 1, Mode: config.IDSimplified},
					Options{RunID: fmt.Sprintf("run-%d", round), Count: true, Progress: func(s Stats) { last = s }})
				if err != nil {
					t.Fatal(err)
				}
				if s.Total != want || last.Total != want {
					t.Fatalf("round %d: total %d (progress %d), want %d", round, s.Total, last.Total, want)
				}
				f.exec(`INSERT INTO ev VALUES ('x` + fmt.Sprint(round) + `', TIMESTAMP '2024-02-01')`)
			}
			// Each run records the table's rows after it (the volume rule's measure).
			counts, err := st.(store.Mirrors).MirrorRunCounts(context.Background(), 1, []string{"run-0", "run-2"})
			if err != nil || counts["run-0"].Rows != 5 || counts["run-2"].Rows != 7 {
				t.Fatalf("run counts %+v, %v; want table rows 5 and 7", counts, err)
			}
		})
	}
}

// A lookup table keyed by a number: deletes find the rows by the same
// key text the upsert stored.
func TestMirrorLookupNumericKeys(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newMirrorFixture(t, st,
				"id: lk\nimport_type: lookup_table\ntable_params: {table: skus}\nlookup_table_id: skus\nproperty_key_column_name: sku\n",
				`CREATE TABLE skus (sku BIGINT, price DOUBLE)`,
				`INSERT INTO skus VALUES (1, 1.5), (20, 2), (300, 3)`)
			f.sync("first", 3, 0, 0)
			f.exec(`DELETE FROM skus WHERE sku = 20`, `UPDATE skus SET price = 4 WHERE sku = 300`)
			f.sync("changes", 0, 1, 1)
			got := map[string]string{}
			if err := st.ScanLookup(context.Background(), 1, "skus", func(k string, row []byte) error {
				got[k] = string(row)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"1": `{"sku":"1","price":1.5}`, "300": `{"sku":"300","price":4}`}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("rows %v, want %v", got, want)
			}
		})
	}
}

// A row whose update is refused keeps, in the state, the JSON names its
// previous version set: its later delete still unsets them.
func TestMirrorPeopleRefusedKeepsNames(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newMirrorFixture(t, st,
				"id: ppl\nimport_type: people\ntable_params: {table: users}\nuser_column_name: uid\njson_properties_column_name: props\n",
				`CREATE TABLE users (uid VARCHAR PRIMARY KEY, plan VARCHAR, props VARCHAR)`,
				`INSERT INTO users VALUES ('u1', 'free', '{"a": 1}')`)
			f.sync("first", 1, 0, 0)
			f.exec(`UPDATE users SET props = '[1, 2]' WHERE uid = 'u1'`)
			if s := f.sync("refused", 0, 1, 0); s.Failed != 1 {
				t.Fatalf("refused round: %d failed, want 1", s.Failed)
			}
			f.exec(`DELETE FROM users`)
			f.sync("deleted", 0, 0, 1)
			if got := profileProps(t, st); len(got["u1"]) != 0 {
				t.Fatalf("after the delete: %v", got)
			}
		})
	}
}
