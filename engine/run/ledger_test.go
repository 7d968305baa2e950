package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// A key imported, then refused after its source row changed, then
// replayed from the quarantine once the mapping is fixed: the ledger
// shows each outcome under the row's primary key, a replay with the
// mapping still wrong keeps the row quarantined, and the store holds
// the event once.
func TestLedgerImportRefuseReplay(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			st := sc.open(t)
			whPath := filepath.Join(t.TempDir(), "wh.duckdb")
			execWH(t, whPath, `CREATE TABLE ev (id INTEGER PRIMARY KEY, user_id VARCHAR, account VARCHAR, event_time TIMESTAMP NOT NULL)`,
				`INSERT INTO ev VALUES (1, 'u1', 'u1', TIMESTAMP '2026-01-01 10:00:00'), (2, 'u2', 'u2', TIMESTAMP '2026-01-01 11:00:00')`)
			spec := func(userCol string) *importspec.Import {
				im, err := importspec.Parse("led.yaml", []byte(fmt.Sprintf(`id: led
project_id: 1
import_type: event_stream
sync_mode: full_sync
source: {kind: duckdb, path: %q}
table_params: {table: ev}
event_name: signup
time_column_name: event_time
user_column_name: %s
`, whPath, userCol)), kinds.Registry(), nil)
				if err != nil {
					t.Fatal(err)
				}
				return im
			}
			r := &Runner{Registry: kinds.Registry(), Store: st}
			project := importspec.Project{ID: 1, Mode: config.IDSimplified}
			run := func(im *importspec.Import, id string, opt Options) Stats {
				t.Helper()
				opt.RunID = id
				s, err := r.Run(ctx, im, project, opt)
				if err != nil {
					t.Fatalf("run %s: %v", id, err)
				}
				return s
			}
			if s := run(spec("user_id"), "r1", Options{}); s.Imported != 2 {
				t.Fatalf("r1: %+v", s)
			}
			execWH(t, whPath, `UPDATE ev SET user_id = NULL WHERE id = 1`)
			if s := run(spec("user_id"), "r2", Options{}); s.Failed != 1 || s.Duplicates != 1 {
				t.Fatalf("r2: %+v", s)
			}
			q, err := st.Quarantined(ctx, 1, "led", nil, 10)
			if err != nil || len(q) != 1 || q[0].Key != "1" || q[0].Field != "user_id" {
				t.Fatalf("quarantine after r2 = %+v, %v", q, err)
			}
			// Replayed with the mapping still wrong: refused again, kept.
			if s := run(spec("user_id"), "r3", Options{Replay: true}); s.Failed != 1 || s.Imported+s.Duplicates != 0 {
				t.Fatalf("r3 (replay, unfixed): %+v", s)
			}
			if q, _ = st.Quarantined(ctx, 1, "led", nil, 10); len(q) != 1 || q[0].Run != "r3" {
				t.Fatalf("quarantine after r3 = %+v", q)
			}
			// The fix: the user id is read from account, which the change
			// left alone; the replayed event equals the one imported first.
			if s := run(spec("account"), "r4", Options{Replay: true}); s.Failed != 0 || s.Duplicates != 1 || s.RowsRead != 1 {
				t.Fatalf("r4 (replay, fixed): %+v", s)
			}
			if q, _ = st.Quarantined(ctx, 1, "led", nil, 10); len(q) != 0 {
				t.Fatalf("quarantine after r4 = %+v", q)
			}
			h, err := st.LedgerHistory(ctx, 1, "led", store.LedgerKeyHash("1"), 10)
			if err != nil {
				t.Fatal(err)
			}
			want := []struct {
				run string
				o   store.Outcome
			}{{"r4", store.OutcomeDuplicate}, {"r3", store.OutcomeRefused}, {"r2", store.OutcomeRefused}, {"r1", store.OutcomeImported}}
			if len(h) != len(want) {
				t.Fatalf("history of key 1 = %+v", h)
			}
			for i, w := range want {
				if h[i].Run != w.run || h[i].Outcome != w.o {
					t.Fatalf("history[%d] = %+v, want %s %s (all: %+v)", i, h[i], w.run, w.o, h)
				}
			}
			if h[1].Field != "user_id" || h[1].Reason == "" {
				t.Fatalf("refusal without its field and reason: %+v", h[1])
			}
			if h2, _ := st.LedgerHistory(ctx, 1, "led", store.LedgerKeyHash("2"), 10); len(h2) != 2 ||
				h2[0].Outcome != store.OutcomeDuplicate || h2[1].Outcome != store.OutcomeImported {
				t.Fatalf("history of key 2 = %+v", h2)
			}
			users := map[string]int{}
			err = st.ScanEvents(ctx, store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 62}, func(e *store.Event) error {
				users[e.DistinctID]++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(users) != 2 || users["u1"] != 1 || users["u2"] != 1 {
				t.Fatalf("stored events by user = %v, want u1 and u2 once each", users)
			}
		})
	}
}

// execWH runs statements on a DuckDB warehouse file, closed afterwards so
// the connector can open it.
func execWH(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// A Mirror key inserted, updated, refused, then deleted: the ledger shows
// each run's outcome under the key's text, on events, people (with and
// without history) and lookup table imports.
func TestLedgerMirror(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			st := sc.open(t)
			f := newMirrorFixture(t, st,
				"id: ev-mirror\nimport_type: event_stream\nevent_name: ev\ntable_params: {table: ev}\ntime_column_name: t\nuser_column_name: uid\n",
				mirrorEventTable...)
			f.sync("insert", 4, 0, 0)
			f.exec(`UPDATE ev SET plan = 'team' WHERE id = 1`)
			f.sync("update", 0, 1, 0)
			f.exec(`UPDATE ev SET uid = NULL WHERE id = 1`)
			if s, err := f.run(); err != nil || s.Failed != 1 {
				t.Fatalf("refuse: %+v, %v", s, err)
			}
			f.exec(`DELETE FROM ev WHERE id = 1`)
			f.sync("delete", 0, 0, 1)
			wantLedger(t, st, "ev-mirror", "1", []string{"run-4 deleted", "run-3 refused", "run-2 updated", "run-1 inserted"})
			wantLedger(t, st, "ev-mirror", "2", []string{"run-1 inserted"})

			p := newMirrorFixture(t, st,
				"id: people-mirror\nimport_type: people\ntable_params: {table: users}\nuser_column_name: uid\n",
				`CREATE TABLE users (uid VARCHAR PRIMARY KEY, plan VARCHAR)`, `INSERT INTO users VALUES ('a', 'free'), ('b', 'pro')`)
			p.sync("insert", 2, 0, 0)
			p.exec(`UPDATE users SET plan = 'pro' WHERE uid = 'a'`)
			p.sync("update", 0, 1, 0)
			p.exec(`DELETE FROM users WHERE uid = 'a'`)
			p.sync("delete", 0, 0, 1)
			wantLedger(t, st, "people-mirror", "a", []string{"run-3 deleted", "run-2 updated", "run-1 inserted"})

			lk := newMirrorFixture(t, st,
				"id: lk-mirror\nimport_type: lookup_table\ntable_params: {table: skus}\nlookup_table_id: skus\nproperty_key_column_name: sku\n",
				`CREATE TABLE skus (id INTEGER PRIMARY KEY, sku VARCHAR, title VARCHAR)`, `INSERT INTO skus VALUES (1, 'a', 'Apple'), (2, 'b', 'Banana')`)
			lk.sync("insert", 2, 0, 0)
			lk.exec(`UPDATE skus SET sku = NULL WHERE id = 1`)
			if s, err := lk.run(); err != nil || s.Failed != 1 {
				t.Fatalf("lookup refuse: %+v, %v", s, err)
			}
			lk.exec(`DELETE FROM skus WHERE id = 1`)
			lk.sync("delete", 0, 0, 1)
			wantLedger(t, st, "lk-mirror", "1", []string{"run-3 deleted", "run-2 refused", "run-1 inserted"})
			wantLedger(t, st, "lk-mirror", "2", []string{"run-1 inserted"})

			h := newMirrorFixture(t, st,
				"id: hist-mirror\nimport_type: people\ntable_params: {table: hist}\nuser_column_name: uid\nkey_columns: [id]\nhistory: {start_time_column_name: start}\n",
				`CREATE TABLE hist (id INTEGER PRIMARY KEY, uid VARCHAR, start TIMESTAMP, plan VARCHAR)`,
				`INSERT INTO hist VALUES (1, 'h1', '2024-01-01', 'free'), (2, 'h2', '2024-01-01', 'pro'), (3, 'h3', '2024-01-01', 'team')`)
			h.sync("insert", 3, 0, 0)
			h.exec(`UPDATE hist SET uid = NULL WHERE id = 1`, `UPDATE hist SET start = NULL WHERE id = 2`)
			if s, err := h.run(); err != nil || s.Failed != 2 {
				t.Fatalf("history refuse: %+v, %v", s, err)
			}
			wantLedger(t, st, "hist-mirror", "1", []string{"run-2 refused", "run-1 inserted"})
			wantLedger(t, st, "hist-mirror", "2", []string{"run-2 refused", "run-1 inserted"})
			wantLedger(t, st, "hist-mirror", "3", []string{"run-1 inserted"})
		})
	}
}

// People and groups imports record imported per key; a key refused says
// why.
func TestLedgerPeopleGroups(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			st := sc.open(t)
			whPath := filepath.Join(t.TempDir(), "wh.duckdb")
			execWH(t, whPath, `CREATE TABLE users (uid VARCHAR, plan VARCHAR)`, `INSERT INTO users VALUES ('a', 'free'), (NULL, 'pro')`,
				`CREATE TABLE orgs (org VARCHAR PRIMARY KEY, size INTEGER)`, `INSERT INTO orgs VALUES ('o1', 5)`)
			r := &Runner{Registry: kinds.Registry(), Store: st}
			project := importspec.Project{ID: 1, Mode: config.IDSimplified}
			for _, c := range []struct{ id, doc string }{
				{"ppl", "import_type: people\ntable_params: {table: users}\nuser_column_name: uid\n"},
				{"grp", "import_type: groups\ntable_params: {table: orgs}\ngroup_key: company\ngroup_id_column: org\n"},
			} {
				im, err := importspec.Parse(c.id+".yaml", []byte(fmt.Sprintf("id: %s\nproject_id: 1\nsync_mode: full_sync\nsource: {kind: duckdb, path: %q}\n%s", c.id, whPath, c.doc)),
					kinds.Registry(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Run(ctx, im, project, Options{RunID: c.id + "-1"}); err != nil {
					t.Fatalf("%s: %v", c.id, err)
				}
			}
			wantLedger(t, st, "ppl", "a", []string{"ppl-1 imported"})
			wantLedger(t, st, "grp", "o1", []string{"grp-1 imported"})
		})
	}
}

// wantLedger checks a key's history, newest first, as "run outcome".
func wantLedger(t *testing.T, st interface {
	LedgerHistory(ctx context.Context, project int64, importID string, hash [16]byte, limit int) ([]store.LedgerLine, error)
}, importID, key string, want []string) {
	t.Helper()
	h, err := st.LedgerHistory(context.Background(), 1, importID, store.LedgerKeyHash(key), 10)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(h))
	for i, l := range h {
		got[i] = l.Run + " " + l.Outcome.String()
		if l.Outcome == store.OutcomeRefused && (l.Field == "" || l.Reason == "") {
			t.Fatalf("%s key %s: a refusal without field and reason: %+v", importID, key, l)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s key %s: ledger %v, want %v", importID, key, got, want)
	}
}

// A people row refused (no user id) is quarantined; replayed after the
// mapping is fixed, its profile is stored and the ledger shows both.
func TestLedgerReplayPeople(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			st := sc.open(t)
			whPath := filepath.Join(t.TempDir(), "wh.duckdb")
			execWH(t, whPath, `CREATE TABLE users (id INTEGER PRIMARY KEY, uid VARCHAR, alt VARCHAR, plan VARCHAR)`,
				`INSERT INTO users VALUES (1, 'a', 'a', 'free'), (2, NULL, 'b', 'pro')`)
			spec := func(col string) *importspec.Import {
				im, err := importspec.Parse("ppl.yaml", []byte(fmt.Sprintf("id: ppl\nproject_id: 1\nimport_type: people\nsync_mode: full_sync\nsource: {kind: duckdb, path: %q}\ntable_params: {table: users}\nuser_column_name: %s\n", whPath, col)),
					kinds.Registry(), nil)
				if err != nil {
					t.Fatal(err)
				}
				return im
			}
			r := &Runner{Registry: kinds.Registry(), Store: st}
			project := importspec.Project{ID: 1, Mode: config.IDSimplified}
			if s, err := r.Run(ctx, spec("uid"), project, Options{RunID: "p1"}); err != nil || s.Failed != 1 {
				t.Fatalf("p1: %+v, %v", s, err)
			}
			if q, err := st.Quarantined(ctx, 1, "ppl", nil, 10); err != nil || len(q) != 1 || q[0].Key != "2" {
				t.Fatalf("quarantine after p1 = %+v, %v", q, err)
			}
			if s, err := r.Run(ctx, spec("alt"), project, Options{RunID: "p2", Replay: true}); err != nil || s.Failed != 0 || s.RowsRead != 1 {
				t.Fatalf("p2 (replay): %+v, %v", s, err)
			}
			if q, _ := st.Quarantined(ctx, 1, "ppl", nil, 10); len(q) != 0 {
				t.Fatalf("quarantine after p2 = %+v", q)
			}
			wantLedger(t, st, "ppl", "2", []string{"p2 imported", "p1 refused"})
			wantLedger(t, st, "ppl", "1", []string{"p1 imported"})
			found := false
			err := st.ScanProfiles(ctx, store.ProfileScan{Project: 1, Kind: profile.User}, func(p *store.StoredProfile) error {
				found = found || p.ID == "b"
				return nil
			})
			if err != nil || !found {
				t.Fatalf("replayed profile b stored: %v, %v", found, err)
			}
		})
	}
}
