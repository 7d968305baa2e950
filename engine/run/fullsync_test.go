package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// fullFixture is a DuckDB warehouse table synced by a full_sync people or
// groups import into a real store.
type fullFixture struct {
	t       *testing.T
	st      store.Store
	whPath  string
	im      *importspec.Import
	kind    profile.Kind
	project importspec.Project
}

func newFullFixture(t *testing.T, st store.Store, table, spec string) *fullFixture {
	t.Helper()
	f := &fullFixture{t: t, st: st, whPath: filepath.Join(t.TempDir(), "wh.duckdb"), kind: profile.User,
		project: importspec.Project{ID: 1, Mode: config.IDSimplified}}
	f.exec(table)
	im, err := importspec.Parse("full.yaml", []byte(fmt.Sprintf("project_id: 1\nsync_mode: full_sync\nsource: {kind: duckdb, path: %q}\n%s", f.whPath, spec)),
		kinds.Registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	f.im = im
	if im.ImportType == importspec.Groups {
		f.kind = profile.Group
	}
	return f
}

// exec changes the warehouse; the connection is closed at once because
// the connector opens the file itself.
func (f *fullFixture) exec(stmts ...string) {
	f.t.Helper()
	db, err := sql.Open("duckdb", f.whPath)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			f.t.Fatalf("%s: %v", s, err)
		}
	}
}

func (f *fullFixture) runWith(st store.Store, id string) (Stats, error) {
	r := &Runner{Registry: kinds.Registry(), Store: st}
	return r.Run(context.Background(), f.im, f.project, Options{RunID: id})
}

func (f *fullFixture) sync(id string) Stats {
	f.t.Helper()
	s, err := f.runWith(f.st, id)
	if err != nil {
		f.t.Fatalf("run %s: %v", id, err)
	}
	return s
}

// set writes properties as another source would (/engage, /groups).
func (f *fullFixture) set(id string, props map[string]any) {
	f.t.Helper()
	u := profile.Update{Kind: f.kind, Op: profile.OpSet}
	if f.kind == profile.Group {
		u.GroupKey, u.GroupID = f.im.GroupKey, id
	} else {
		u.DistinctID = id
	}
	for k, v := range props {
		b, _ := json.Marshal(v)
		u.Props = append(u.Props, profile.Property{Name: k, Value: b})
	}
	if _, err := f.st.Write(context.Background(), []store.Batch{{Project: 1, Profiles: []store.ProfileUpdate{{Update: u}}}}); err != nil {
		f.t.Fatal(err)
	}
}

// profiles returns every profile's properties but $last_seen.
func (f *fullFixture) profiles() map[string]map[string]any {
	f.t.Helper()
	out := map[string]map[string]any{}
	q := store.ProfileScan{Project: 1, Kind: f.kind, GroupKey: f.im.GroupKey}
	err := f.st.ScanProfiles(context.Background(), q, func(p *store.StoredProfile) error {
		var m map[string]any
		if err := json.Unmarshal(p.Props, &m); err != nil {
			return err
		}
		delete(m, profile.LastSeen)
		out[p.ID] = m
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fullFixture) want(step string, want map[string]map[string]any) {
	f.t.Helper()
	if got := f.profiles(); !reflect.DeepEqual(got, want) {
		f.t.Fatalf("%s: profiles\ngot  %v\nwant %v", step, got, want)
	}
}

type obj = map[string]any

// failingSettle is the store with the end pass broken: a run dies after
// its profiles are written and tracked, before it unsets anything.
type failingSettle struct{ store.Store }

func (failingSettle) StaleMembers(context.Context, int64, string, string, func(store.StaleMember) error) error {
	return errors.New("injected: the process died")
}

// A full sync replaces what the import wrote with what the table holds: a
// NULL column and a JSON key that disappeared are unset, an absent profile
// loses every property the import set and keeps what others set; a run
// that dies before its end pass is cleaned up by the next; a refused row
// keeps its profile's properties.
func testFullSyncPeople(t *testing.T, st store.Store) {
	f := newFullFixture(t, st, `CREATE TABLE users (user_id VARCHAR, name VARCHAR, plan VARCHAR, score DOUBLE,
		address STRUCT(city VARCHAR, zip VARCHAR), props JSON);
		INSERT INTO users VALUES
			('u1', 'Ada', 'pro', 1.5, {'city': 'Berlin', 'zip': '10115'}, '{"a": 1, "b": "x"}'),
			('u2', 'Grace', 'free', 2, NULL, '{"c": true}'),
			('u3', 'Linus', 'pro', NULL, {'city': 'Oslo', 'zip': NULL}, NULL)`,
		`id: people
import_type: people
table_params: {table: users}
user_column_name: user_id
json_properties_column_name: props
property_mappings: {name: $name}
`)
	f.set("u1", obj{"note": "by hand"})
	f.set("u3", obj{"vip": true, "score": 9}) // score: the table's NULL replaces it
	if s := f.sync("run-1"); s.Imported != 3 || s.Failed != 0 {
		t.Fatalf("run 1: %+v", s)
	}
	f.want("run 1", map[string]obj{
		"u1": {"$name": "Ada", "plan": "pro", "score": 1.5, "address.city": "Berlin", "address.zip": "10115", "a": 1.0, "b": "x", "note": "by hand"},
		"u2": {"$name": "Grace", "plan": "free", "score": 2.0, "c": true},
		"u3": {"$name": "Linus", "plan": "pro", "address.city": "Oslo", "vip": true},
	})

	f.set("u2", obj{"extra": 1})
	f.exec(`UPDATE users SET plan = NULL, props = '{"a": 2}' WHERE user_id = 'u1'`,
		`DELETE FROM users WHERE user_id = 'u2'`,
		`INSERT INTO users VALUES ('u4', 'Ken', 'free', NULL, NULL, '{"d": "y"}')`)
	if s := f.sync("run-2"); s.Imported != 3 || s.Failed != 0 {
		t.Fatalf("run 2: %+v", s)
	}
	f.want("run 2", map[string]obj{
		"u1": {"$name": "Ada", "score": 1.5, "address.city": "Berlin", "address.zip": "10115", "a": 2.0, "note": "by hand"},
		"u2": {"extra": 1.0},
		"u3": {"$name": "Linus", "plan": "pro", "address.city": "Oslo", "vip": true},
		"u4": {"$name": "Ken", "plan": "free", "d": "y"},
	})

	// run-3 writes a new JSON key and dies before its end pass; run-4 no
	// longer finds the key nor u4, and unsets both.
	f.exec(`UPDATE users SET props = '{"e": 5}' WHERE user_id = 'u3'`)
	if _, err := f.runWith(failingSettle{st}, "run-3"); err == nil {
		t.Fatal("run 3 succeeded despite the injected failure")
	}
	f.want("run 3 (died)", map[string]obj{
		"u1": {"$name": "Ada", "score": 1.5, "address.city": "Berlin", "address.zip": "10115", "a": 2.0, "note": "by hand"},
		"u2": {"extra": 1.0},
		"u3": {"$name": "Linus", "plan": "pro", "address.city": "Oslo", "vip": true, "e": 5.0},
		"u4": {"$name": "Ken", "plan": "free", "d": "y"},
	})
	f.exec(`UPDATE users SET props = NULL WHERE user_id = 'u3'`, `DELETE FROM users WHERE user_id = 'u4'`)
	f.sync("run-4")
	u3 := obj{"$name": "Linus", "plan": "pro", "address.city": "Oslo", "vip": true}
	f.want("run 4", map[string]obj{
		"u1": {"$name": "Ada", "score": 1.5, "address.city": "Berlin", "address.zip": "10115", "a": 2.0, "note": "by hand"},
		"u2": {"extra": 1.0},
		"u3": u3,
		"u4": {},
	})

	// u3's row is refused (its JSON properties are not an object): its
	// profile keeps what the import set, though the run succeeds.
	f.exec(`UPDATE users SET plan = NULL, props = '[1]' WHERE user_id = 'u3'`)
	if s := f.sync("run-5"); s.Failed != 1 {
		t.Fatalf("run 5: %+v; want u3's row failed", s)
	}
	if got := f.profiles()["u3"]; !reflect.DeepEqual(got, u3) {
		t.Fatalf("u3 after its row was refused: %v, want %v", got, u3)
	}
}

// Group profiles follow the same rule, per group key.
func testFullSyncGroups(t *testing.T, st store.Store) {
	f := newFullFixture(t, st, `CREATE TABLE companies (company_id VARCHAR, name VARCHAR, employees INTEGER, props JSON);
		INSERT INTO companies VALUES ('co-1', 'Acme', 10, '{"tier": "gold", "region": "eu"}'),
			('co-2', 'Globex', 20, NULL), ('co-3', 'Initech', NULL, '{"tier": "silver"}')`,
		`id: companies
import_type: groups
table_params: {table: companies}
group_key: company_id
group_id_column: company_id
json_properties_column_name: props
`)
	f.set("co-2", obj{"owner": "sales"})
	f.sync("g-1")
	f.want("run 1", map[string]obj{
		"co-1": {"name": "Acme", "employees": 10.0, "tier": "gold", "region": "eu"},
		"co-2": {"name": "Globex", "employees": 20.0, "owner": "sales"},
		"co-3": {"name": "Initech", "tier": "silver"},
	})
	f.exec(`UPDATE companies SET name = NULL, props = '{"tier": "gold"}' WHERE company_id = 'co-1'`,
		`DELETE FROM companies WHERE company_id = 'co-2'`,
		`INSERT INTO companies VALUES ('co-4', 'Hooli', 4, NULL)`)
	f.sync("g-2")
	f.want("run 2", map[string]obj{
		"co-1": {"employees": 10.0, "tier": "gold"},
		"co-2": {"owner": "sales"},
		"co-3": {"name": "Initech", "tier": "silver"},
		"co-4": {"name": "Hooli", "employees": 4.0},
	})

	// Deleting the import's data releases every property it owns.
	n, err := ReleaseProfiles(context.Background(), st, 1, f.im.ID)
	if err != nil || n != 3 {
		t.Fatalf("release: %d profiles, %v; want 3", n, err)
	}
	f.want("released", map[string]obj{"co-1": {}, "co-2": {"owner": "sales"}, "co-3": {}, "co-4": {}})
}

// Other modes keep today's $set semantics (a NULL column leaves the
// property alone), yet track what they set, so deleting the import's data
// releases exactly that.
func testReleaseOneTime(t *testing.T, st store.Store) {
	f := newFullFixture(t, st, `CREATE TABLE users (user_id VARCHAR, plan VARCHAR, score DOUBLE);
		INSERT INTO users VALUES ('u1', 'pro', NULL), ('u2', NULL, 3)`,
		"id: once\nimport_type: people\ntable_params: {table: users}\nuser_column_name: user_id\n")
	f.im.SyncMode = importspec.OneTime
	f.set("u1", obj{"score": 7, "vip": true})
	f.sync("o-1")
	f.want("one_time run", map[string]obj{"u1": {"plan": "pro", "score": 7.0, "vip": true}, "u2": {"score": 3.0}})
	if n, err := ReleaseProfiles(context.Background(), st, 1, "once"); err != nil || n != 2 {
		t.Fatalf("release: %d, %v; want 2 profiles", n, err)
	}
	f.want("released", map[string]obj{"u1": {"score": 7.0, "vip": true}, "u2": {}})
}

func TestReleaseOneTime(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) { testReleaseOneTime(t, sc.open(t)) })
	}
}

func TestFullSyncPeople(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) { testFullSyncPeople(t, sc.open(t)) })
	}
}

func TestFullSyncGroups(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) { testFullSyncGroups(t, sc.open(t)) })
	}
}
