package run

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
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
