package run

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// historyCurrent is the warehouse's view of the History table hist: per
// user, the version with the latest start ≤ now, without the start.
const historyCurrent = `(SELECT * EXCLUDE (start, rn) FROM (SELECT *, row_number() OVER (PARTITION BY uid ORDER BY start DESC) AS rn
	FROM hist WHERE start <= now()) WHERE rn = 1) AS cur`

// asOfProps returns the store's version of uid current at the time (ms).
func asOfProps(t *testing.T, st store.Store, importID, uid string, atMs int64) string {
	t.Helper()
	got := "none"
	err := st.(store.Histories).HistoryAsOf(context.Background(), 1, importID, "", []string{uid}, atMs, func(v store.HistoryVersion) error {
		got = string(v.Props)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

const (
	jan1 = 1704067200000 // 2024-01-01T00:00:00Z in ms
	feb1 = 1706745600000
	mar1 = 1709251200000
	jun1 = 1717200000000
)

// TestMirrorHistory: a History table's versions are inserted, updated,
// deleted and moved (a changed start); after each round the profiles show
// the version current now, and the store answers as-of lookups at the
// boundaries. A version starting in the future is not applied yet.
func TestMirrorHistory(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: hist\nimport_type: people\ntable_params: {table: hist}\nuser_column_name: uid\nhistory: {start_time_column_name: start}\n",
				`CREATE TABLE hist (uid VARCHAR, start TIMESTAMP, plan VARCHAR, seats INTEGER)`,
				`INSERT INTO hist VALUES ('u1', '2024-01-01', 'free', 1), ('u1', '2024-06-01', 'pro', 5),
					('u2', '2024-03-01', 'team', NULL), ('u3', '2999-01-01', 'future', 1)`)
			f.sync("first", 4, 0, 0)
			f.wantProfiles("first", profile.User, historyCurrent, "uid")
			for _, c := range []struct {
				uid  string
				at   int64
				want string
			}{
				{"u1", jan1 - 1, "none"}, // before the first version
				{"u1", jan1, `{"plan":"free","seats":1}`},
				{"u1", jun1 - 1, `{"plan":"free","seats":1}`},
				{"u1", jun1, `{"plan":"pro","seats":5}`}, // exactly at a start: that version
				{"u2", mar1, `{"plan":"team"}`},
				{"u3", 1 << 60, "none"}, // a future version is not stored
			} {
				if got := asOfProps(t, f.st, "hist", c.uid, c.at); got != c.want {
					t.Errorf("%s as of %d: %s, want %s", c.uid, c.at, got, c.want)
				}
			}
			if f.profiles(profile.User)["u3"] != "" {
				t.Fatal("a version starting in the future was applied")
			}

			// Delete u1's current version (u1 falls back to the first),
			// move u2's start and change it; the future row is looked at again.
			f.exec(`DELETE FROM hist WHERE uid = 'u1' AND start = '2024-06-01'`,
				`UPDATE hist SET start = '2024-02-01', seats = 7 WHERE uid = 'u2'`)
			// preview --changes plans the same counts without writing.
			r := &Runner{Registry: kinds.Registry(), Store: f.st}
			plan, err := r.PlanMirror(context.Background(), f.im, importspec.Project{ID: 1, Mode: config.IDSimplified})
			if err != nil || plan.Inserts != 1 || plan.Updates != 1 || plan.Deletes != 2 {
				t.Fatalf("plan of the changes: %+v, %v", plan, err)
			}
			f.sync("changes", 1, 1, 2)
			f.wantProfiles("changes", profile.User, historyCurrent, "uid")
			if got := asOfProps(t, f.st, "hist", "u2", mar1-1); got != `{"plan":"team","seats":7}` {
				t.Errorf("u2 after its start moved to Feb 1, as of Mar 1 - 1 ms: %s", got)
			}
			if got := asOfProps(t, f.st, "hist", "u2", feb1-1); got != "none" {
				t.Errorf("u2 before its moved start: %s, want none", got)
			}

			// Update a version in place; a new version of u1 becomes current.
			f.exec(`UPDATE hist SET plan = 'basic' WHERE uid = 'u1' AND start = '2024-01-01'`,
				`INSERT INTO hist VALUES ('u1', '2025-01-01', 'enterprise', NULL)`)
			f.sync("update and new version", 1, 2, 0)
			f.wantProfiles("new version", profile.User, historyCurrent, "uid")

			// Every version of u2 gone: its profile loses the table's properties.
			f.exec(`DELETE FROM hist WHERE uid = 'u2'`)
			f.sync("u2 gone", 0, 1, 1)
			f.wantProfiles("u2 gone", profile.User, historyCurrent, "uid")
			f.sync("unchanged", 0, 1, 0) // only the future row, again
			// Deleting the import forgets its versions with its state.
			if err := ForgetMirror(context.Background(), nil, f.st, f.im); err != nil {
				t.Fatal(err)
			}
			if got := asOfProps(t, f.st, "hist", "u1", 1<<50); got != "none" {
				t.Fatalf("versions after the import was forgotten: %s", got)
			}
		})
	}
}

// TestMirrorHistoryGroups: a groups History table shows each group's
// current version.
func TestMirrorHistoryGroups(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			f := newMirrorFixture(t, sc.open(t),
				"id: ghist\nimport_type: groups\ntable_params: {table: hist}\ngroup_key: company_id\ngroup_id_column: uid\nhistory: {start_time_column_name: start}\n",
				`CREATE TABLE hist (uid VARCHAR, start DATE, tier VARCHAR)`,
				`INSERT INTO hist VALUES ('c1', '2024-01-01', 'small'), ('c1', '2024-05-01', 'large'), ('c2', '2024-02-01', 'mid')`)
			f.sync("first", 3, 0, 0)
			f.wantProfiles("first", profile.Group, historyCurrent, "uid")
			f.exec(`DELETE FROM hist WHERE uid = 'c1' AND start = '2024-05-01'`)
			f.sync("delete", 0, 0, 1)
			f.wantProfiles("delete", profile.Group, historyCurrent, "uid")
		})
	}
}

// TestMirrorHistoryRefusesNested: a list column fails the run with an
// error naming it; validation refuses history outside mirror people/groups.
func TestMirrorHistoryRefusesNested(t *testing.T) {
	sc := testStores(t)[0]
	f := newMirrorFixture(t, sc.open(t),
		"id: hist\nimport_type: people\ntable_params: {table: hist}\nuser_column_name: uid\nhistory: {start_time_column_name: start}\n",
		`CREATE TABLE hist (uid VARCHAR, start TIMESTAMP, tags VARCHAR[])`,
		`INSERT INTO hist VALUES ('u1', '2024-01-01', ['a'])`)
	_, err := f.run()
	if err == nil || !strings.Contains(err.Error(), "tags") || !strings.Contains(err.Error(), "no list or object columns") || !connectors.IsPermanent(err) {
		t.Fatalf("run of a History table with a list column: %v", err)
	}
	for spec, want := range map[string]string{
		"import_type: people\nsync_mode: full_sync\nuser_column_name: uid\nhistory: {start_time_column_name: s}\n":                              "needs sync_mode mirror",
		"import_type: lookup_table\nsync_mode: mirror\nlookup_table_id: x\nproperty_key_column_name: k\nhistory: {start_time_column_name: s}\n": "people and groups imports only",
		"import_type: people\nsync_mode: mirror\nuser_column_name: uid\nhistory: {}\n":                                                          "history.start_time_column_name",
	} {
		im, err := importspec.Parse("h.yaml", []byte(fmt.Sprintf("id: h\nproject_id: 1\nsource: {kind: duckdb}\ntable_params: {table: t}\n%s", spec)), nil, nil)
		if err == nil {
			err = im.Validate(nil, func(int64) (importspec.Project, bool) {
				return importspec.Project{ID: 1, Mode: config.IDSimplified}, true
			})
		}
		var errs importspec.Errors
		if err == nil || !errors.As(err, &errs) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", spec, err, want)
		}
	}
}
