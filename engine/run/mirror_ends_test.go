package run

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
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
