package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// mirrorFixture is a warehouse table mirrored by one import into a real
// store; after each round the test compares every read with the table.
type mirrorFixture struct {
	t      *testing.T
	st     store.Store
	whPath string
	wh     warehouse // nil: the DuckDB file whPath
	reg    *connectors.Registry
	im     *importspec.Import
	runs   int
}

// warehouse is a source kind's table under test (mirror_kinds_test.go).
type warehouse interface {
	exec(t *testing.T, stmts ...string)
	query(t *testing.T, q string) []map[string]string
}

func newMirrorFixture(t *testing.T, st store.Store, spec string, stmts ...string) *mirrorFixture {
	t.Helper()
	f := &mirrorFixture{t: t, st: st, whPath: filepath.Join(t.TempDir(), "wh.duckdb")}
	f.exec(stmts...)
	im, err := importspec.Parse("mirror.yaml", []byte(fmt.Sprintf("project_id: 1\nsync_mode: mirror\nsource: {kind: duckdb, path: %q}\n%s", f.whPath, spec)),
		kinds.Registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(kinds.Registry(), func(int64) (importspec.Project, bool) {
		return importspec.Project{ID: 1, Mode: config.IDSimplified}, true
	}); err != nil {
		t.Fatal(err)
	}
	f.im = im
	return f
}

func (f *mirrorFixture) exec(stmts ...string) {
	f.t.Helper()
	if f.wh != nil {
		f.wh.exec(f.t, stmts...)
		return
	}
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

// query returns the warehouse's rows of q, each as column → value text
// (NULL columns left out).
func (f *mirrorFixture) query(q string) []map[string]string {
	f.t.Helper()
	if f.wh != nil {
		return f.wh.query(f.t, q)
	}
	db, err := sql.Open("duckdb", f.whPath)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			f.t.Fatal(err)
		}
		m := map[string]string{}
		for i, c := range cols {
			if vals[i].Valid {
				m[c] = vals[i].String
			}
		}
		out = append(out, m)
	}
	return out
}

func (f *mirrorFixture) run() (Stats, error) {
	f.runs++
	reg := f.reg
	if reg == nil {
		reg = kinds.Registry()
	}
	r := &Runner{Registry: reg, Store: f.st}
	return r.Run(context.Background(), f.im, importspec.Project{ID: 1, Mode: config.IDSimplified}, Options{RunID: fmt.Sprintf("run-%d", f.runs)})
}

// sync runs the import and checks its counts (inserted, updated, deleted).
func (f *mirrorFixture) sync(step string, ins, upd, del int64) Stats {
	f.t.Helper()
	s, err := f.run()
	if err != nil {
		f.t.Fatalf("%s: %v", step, err)
	}
	if s.Inserted != ins || s.Updated != upd || s.Deleted != del {
		f.t.Fatalf("%s: inserted %d updated %d deleted %d, want %d %d %d", step, s.Inserted, s.Updated, s.Deleted, ins, upd, del)
	}
	return s
}

// events returns every stored event as "distinct_id|time ms|prop=value,…"
// (properties sorted, run tags left out), sorted.
func (f *mirrorFixture) events() []string {
	f.t.Helper()
	var out []string
	q := store.Scan{Project: 1, Resolve: true, FromMs: 0, ToMs: 1 << 62}
	err := f.st.ScanEvents(context.Background(), q, func(e *store.Event) error {
		var m map[string]any
		if err := json.Unmarshal(store.SpliceProps(nil, e.Props, nil), &m); err != nil {
			return err
		}
		var kv []string
		for k, v := range m {
			if strings.HasPrefix(k, "$") || k == "mp_lib" {
				continue
			}
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(kv)
		out = append(out, fmt.Sprintf("%s|%s|%d|%s", e.Name, e.DistinctID, e.TimeMs, strings.Join(kv, ",")))
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// wantEvents compares the stored events with the table's rows.
func (f *mirrorFixture) wantEvents(step string) {
	f.t.Helper()
	var want []string
	for _, r := range f.query(`SELECT * FROM ev`) {
		t, err := time.Parse("2006-01-02T15:04:05Z", r["t"])
		if err != nil {
			f.t.Fatalf("time %q: %v", r["t"], err)
		}
		var kv []string
		for k, v := range r {
			if k != "t" && k != "uid" {
				kv = append(kv, k+"="+v)
			}
		}
		sort.Strings(kv)
		want = append(want, fmt.Sprintf("ev|%s|%d|%s", r["uid"], t.UnixMilli(), strings.Join(kv, ",")))
	}
	sort.Strings(want)
	if got := f.events(); !reflect.DeepEqual(got, want) {
		f.t.Fatalf("%s: events\ngot  %q\nwant %q", step, got, want)
	}
}

// profiles returns every profile with properties, as id → prop=value list.
func (f *mirrorFixture) profiles(kind profile.Kind) map[string]string {
	f.t.Helper()
	out := map[string]string{}
	q := store.ProfileScan{Project: 1, Kind: kind, GroupKey: f.im.GroupKey}
	err := f.st.ScanProfiles(context.Background(), q, func(p *store.StoredProfile) error {
		var m map[string]any
		if err := json.Unmarshal(p.Props, &m); err != nil {
			return err
		}
		var kv []string
		for k, v := range m {
			if !strings.HasPrefix(k, "$") {
				kv = append(kv, fmt.Sprintf("%s=%v", k, v))
			}
		}
		if len(kv) > 0 {
			sort.Strings(kv)
			out[p.ID] = strings.Join(kv, ",")
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *mirrorFixture) wantProfiles(step string, kind profile.Kind, table, key string) {
	f.t.Helper()
	want := map[string]string{}
	for _, r := range f.query(`SELECT * FROM ` + table) {
		var kv []string
		for k, v := range r {
			if k != key {
				kv = append(kv, k+"="+v)
			}
		}
		if len(kv) > 0 {
			sort.Strings(kv)
			want[r[key]] = strings.Join(kv, ",")
		}
	}
	if got := f.profiles(kind); !reflect.DeepEqual(got, want) {
		f.t.Fatalf("%s: profiles\ngot  %v\nwant %v", step, got, want)
	}
}

func TestMirrorEvents(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: ev-mirror\nimport_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n",
				mirrorEventTable...)
			mirrorEventRounds(f)
		})
	}
}

// mirrorEventTable is table ev's first state: ties on time, NULLs.
var mirrorEventTable = []string{
	`CREATE TABLE ev (id INTEGER PRIMARY KEY, uid VARCHAR(20), t TIMESTAMP NOT NULL, plan VARCHAR(20), n INTEGER)`,
	`INSERT INTO ev VALUES (1, 'u1', '2024-01-01 00:00:01', 'free', 1), (2, 'u2', '2024-01-01 00:00:02', NULL, 2),
		(3, 'u3', '2024-01-01 00:00:03', 'pro', NULL), (4, 'u4', '2024-01-01 00:00:03', 'pro', NULL)`,
}

// mirrorEventRounds changes table ev round by round (in SQL every
// warehouse takes) and checks after each run that the export equals it.
func mirrorEventRounds(f *mirrorFixture) {
	f.sync("first", 4, 0, 0)
	f.wantEvents("first")
	f.sync("again", 0, 0, 0)
	f.wantEvents("again")

	// A property changes, a row moves to another user and time,
	// one becomes NULL, one is deleted, one is new.
	f.exec(`UPDATE ev SET plan = 'pro' WHERE id = 1`,
		`UPDATE ev SET uid = 'u9', t = '2024-02-01 00:00:00' WHERE id = 2`,
		`UPDATE ev SET plan = NULL WHERE id = 4`,
		`DELETE FROM ev WHERE id = 3`,
		`INSERT INTO ev VALUES (5, 'u5', '2024-01-01 00:00:03', 'free', 5)`)
	f.sync("changes", 1, 3, 1)
	f.wantEvents("changes")

	// A nullable column added at the end re-sends nothing.
	f.exec(`ALTER TABLE ev ADD COLUMN extra VARCHAR(20)`)
	f.sync("new column", 0, 0, 0)
	f.exec(`UPDATE ev SET extra = 'x' WHERE id = 5`)
	f.sync("new column set", 0, 1, 0)
	f.wantEvents("new column set")

	// A key deleted, then inserted again with other values.
	f.exec(`DELETE FROM ev WHERE id = 1`)
	f.sync("key deleted", 0, 0, 1)
	f.wantEvents("key deleted")
	f.exec(`INSERT INTO ev VALUES (1, 'u1', '2024-03-01 00:00:00', 'team', 7, NULL)`)
	f.sync("key back", 1, 0, 0)
	f.wantEvents("key back")

	// The table dropped and recreated with the same rows (a dbt
	// full refresh): nothing to do.
	f.exec(`CREATE TABLE ev2 AS SELECT * FROM ev`, `DROP TABLE ev`,
		`CREATE TABLE ev (id INTEGER PRIMARY KEY, uid VARCHAR(20), t TIMESTAMP NOT NULL, plan VARCHAR(20), n INTEGER, extra VARCHAR(20))`,
		`INSERT INTO ev SELECT * FROM ev2`, `DROP TABLE ev2`)
	f.sync("recreated", 0, 0, 0)
	f.wantEvents("recreated")

	// Truncated: everything goes.
	f.exec(`DELETE FROM ev`)
	f.sync("truncated", 0, 0, 4)
	f.wantEvents("truncated")
}

// Without a key, the whole row is the key: identical rows collapse into
// one event, and a changed row is a delete plus an insert.
func TestMirrorEventsWithoutKey(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: ev-nokey\nimport_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n",
				`CREATE TABLE ev (uid VARCHAR, t TIMESTAMP NOT NULL, plan VARCHAR)`,
				`INSERT INTO ev VALUES ('u1', '2024-01-01 00:00:01', 'a'), ('u1', '2024-01-01 00:00:01', 'a'), ('u2', '2024-01-01 00:00:02', NULL)`)
			f.sync("first", 2, 0, 0)
			if got := len(f.events()); got != 2 {
				t.Fatalf("identical rows: %d events, want 2", got)
			}
			f.exec(`UPDATE ev SET plan = 'b' WHERE uid = 'u2'`)
			f.sync("changed", 1, 0, 1)
			f.exec(`DELETE FROM ev WHERE uid = 'u1'`, `INSERT INTO ev VALUES ('u1', '2024-01-01 00:00:01', 'a')`)
			f.wantEvents("changed")
		})
	}
}

func TestMirrorPeople(t *testing.T) {
	for _, sc := range testStores(t) {
		for _, del := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/delete_profiles=%v", sc.name, del), func(t *testing.T) {
				spec := "id: ppl\nimport_type: people\ntable_params: {table: users}\nuser_column_name: uid\n"
				if del {
					spec += "delete_profiles: true\n"
				}
				f := newMirrorFixture(t, sc.open(t), spec,
					`CREATE TABLE users (uid VARCHAR PRIMARY KEY, plan VARCHAR, seats INTEGER)`,
					`INSERT INTO users VALUES ('u1', 'free', 1), ('u2', 'pro', NULL), ('u3', 'pro', 3)`)
				f.sync("first", 3, 0, 0)
				f.wantProfiles("first", profile.User, "users", "uid")
				f.exec(`UPDATE users SET plan = NULL, seats = 2 WHERE uid = 'u1'`, `DELETE FROM users WHERE uid = 'u3'`,
					`INSERT INTO users VALUES ('u4', 'team', 9)`)
				f.sync("changes", 1, 1, 1)
				f.wantProfiles("changes", profile.User, "users", "uid")
				f.exec(`ALTER TABLE users ADD COLUMN region VARCHAR`)
				f.sync("new column", 0, 0, 0)
				f.exec(`UPDATE users SET region = 'eu' WHERE uid = 'u2'`)
				f.sync("region", 0, 1, 0)
				f.wantProfiles("region", profile.User, "users", "uid")
				// Emptied: every profile loses the table's properties.
				f.exec(`DELETE FROM users`)
				f.sync("emptied", 0, 0, 3)
				f.wantProfiles("emptied", profile.User, "users", "uid")
				exists := false
				_ = f.st.ScanProfiles(context.Background(), store.ProfileScan{Project: 1, Kind: profile.User}, func(p *store.StoredProfile) error {
					exists = exists || p.ID == "u3"
					return nil
				})
				if exists == del {
					t.Fatalf("deleted row's profile exists = %v with delete_profiles %v", exists, del)
				}
			})
		}
	}
}

func TestMirrorGroups(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: grp\nimport_type: groups\ntable_params: {table: companies}\ngroup_key: company_id\ngroup_id_column: cid\n",
				`CREATE TABLE companies (cid VARCHAR, name VARCHAR, size INTEGER)`,
				`INSERT INTO companies VALUES ('c1', 'Acme', 10), ('c2', 'Beta', NULL)`)
			f.sync("first", 2, 0, 0)
			f.wantProfiles("first", profile.Group, "companies", "cid")
			f.exec(`UPDATE companies SET size = 11, name = NULL WHERE cid = 'c1'`, `DELETE FROM companies WHERE cid = 'c2'`)
			f.sync("changes", 0, 1, 1)
			f.wantProfiles("changes", profile.Group, "companies", "cid")
		})
	}
}

func TestMirrorLookup(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: lk\nimport_type: lookup_table\ntable_params: {table: skus}\nlookup_table_id: skus\nproperty_key_column_name: sku\n",
				`CREATE TABLE skus (sku VARCHAR, title VARCHAR)`,
				`INSERT INTO skus VALUES ('a', 'Apple'), ('b', 'Banana')`)
			rows := func() map[string]string {
				out := map[string]string{}
				if err := f.st.ScanLookup(context.Background(), 1, "skus", func(k string, row []byte) error {
					out[k] = string(row)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return out
			}
			f.sync("first", 2, 0, 0)
			f.exec(`UPDATE skus SET title = 'Apricot' WHERE sku = 'a'`, `DELETE FROM skus WHERE sku = 'b'`, `INSERT INTO skus VALUES ('c', 'Cherry')`)
			f.sync("changes", 1, 1, 1)
			got := rows()
			if len(got) != 2 || !strings.Contains(got["a"], "Apricot") || !strings.Contains(got["c"], "Cherry") {
				t.Fatalf("lookup rows = %v", got)
			}
		})
	}
}

// max_deletes and max_change_ratio stop a run before it applies anything.
func TestMirrorLimits(t *testing.T) {
	sc := testStores(t)[0]
	f := newMirrorFixture(t, sc.open(t),
		"id: ev-lim\nimport_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\nmax_deletes: 1\nmax_change_ratio: 0.5\n",
		`CREATE TABLE ev (id INTEGER PRIMARY KEY, uid VARCHAR, t TIMESTAMP NOT NULL)`,
		`INSERT INTO ev SELECT i, 'u' || i, TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND FROM range(10) t(i)`)
	f.sync("first", 10, 0, 0) // the first run is all inserts against an empty state: base = rows read
	before := f.events()
	f.exec(`DELETE FROM ev WHERE id < 2`, `UPDATE ev SET uid = 'x' WHERE id = 5`)
	if _, err := f.run(); !errors.Is(err, ErrChangeLimit) || !strings.Contains(err.Error(), "max_deletes is 1") {
		t.Fatalf("err = %v, want the max_deletes limit", err)
	}
	if got := f.events(); !reflect.DeepEqual(got, before) {
		t.Fatal("a refused run changed events")
	}
	r := &Runner{Registry: kinds.Registry(), Store: f.st}
	plan, err := r.PlanMirror(context.Background(), f.im, importspec.Project{ID: 1, Mode: config.IDSimplified})
	if err != nil || plan.Deletes != 2 || plan.Updates != 1 || plan.Inserts != 0 || plan.Unchanged != 7 || !reflect.DeepEqual(plan.UpdateKeys, []string{"5"}) {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	// Without max_deletes, the ratio stops it: 3 changes of 10 rows.
	f.im.MaxDeletes = 0
	f.im.MaxChangeRatio = 0.2
	if _, err := f.run(); !errors.Is(err, ErrChangeLimit) || !strings.Contains(err.Error(), "would change 3 of 10 rows") {
		t.Fatalf("err = %v, want the max_change_ratio limit", err)
	}
	if got := f.events(); !reflect.DeepEqual(got, before) {
		t.Fatal("a refused run changed events")
	}
	f.exec(`INSERT INTO ev VALUES (0, 'u0', '2024-01-01')`)
	f.sync("within limits", 0, 1, 1)
	f.wantEvents("within limits")
}

// Identical rows far apart (in different source batches, the second
// while the first's change is still pending) collapse into one event,
// and the next run finds nothing to do.
func TestMirrorRepeatedKeysAcrossBatches(t *testing.T) {
	sc := testStores(t)[0]
	f := newMirrorFixture(t, sc.open(t),
		"id: ev-rep\nimport_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n",
		`CREATE TABLE ev (uid VARCHAR, t TIMESTAMP NOT NULL)`,
		`INSERT INTO ev SELECT 'u' || (i % 2500), TIMESTAMP '2024-01-01' + INTERVAL (i % 2500) SECOND FROM range(5000) t(i)`)
	if _, err := f.run(); err != nil {
		t.Fatal(err)
	}
	if n := len(f.events()); n != 2500 {
		t.Fatalf("%d events, want 2500 (one per distinct row)", n)
	}
	f.sync("again", 0, 0, 0)
	if n := len(f.events()); n != 2500 {
		t.Fatalf("after the second run: %d events, want 2500", n)
	}
}

// A people row keyed by its own id whose user column changes moves its
// properties: the old profile loses the table's properties, the new one
// gets them.
func TestMirrorPeopleProfileMoves(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: ppl-move\nimport_type: people\ntable_params: {table: users}\nuser_column_name: uid\nkey_columns: [id]\nexclude_columns: [id]\n",
				`CREATE TABLE users (id INTEGER, uid VARCHAR, plan VARCHAR)`,
				`INSERT INTO users VALUES (1, 'a', 'free'), (2, 'b', 'pro')`)
			f.sync("first", 2, 0, 0)
			f.exec(`UPDATE users SET uid = 'c' WHERE id = 1`)
			f.sync("moved", 0, 1, 0)
			want := map[string]string{"b": "plan=pro", "c": "plan=free"}
			if got := f.profiles(profile.User); !reflect.DeepEqual(got, want) {
				t.Fatalf("profiles %v, want %v", got, want)
			}
		})
	}
}
