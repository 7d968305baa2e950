package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A row imported, refused after its source row changed, then replayed
// from the quarantine through the app API once the import's mapping is
// fixed: the row's ledger shows the three outcomes, the replay is a run
// of the history with trigger replay, the quarantine is empty and the
// export holds each event once.
func TestLedgerQuarantineReplay(t *testing.T) {
	db := newPGDB(t)
	db.exec(t, `CREATE TABLE led (id bigint PRIMARY KEY, user_id text, account text, event_time timestamptz NOT NULL)`)
	db.exec(t, `INSERT INTO led SELECT i, 'u' || i, 'u' || i, now() - interval '2 hours' + i * interval '1 second' FROM generate_series(1, 3) i`)
	t.Setenv("TRIBUTARY_IT_SYNC_DSN", db.dsn)
	dir := t.TempDir()
	writeSpec := func(userCol string) {
		t.Helper()
		spec := fmt.Sprintf(`id: led
project_id: %d
import_type: event_stream
sync_mode: full_sync
source: {kind: postgres, dsn: "${TRIBUTARY_IT_SYNC_DSN}"}
table_params: {table: led}
event_name: signup
time_column_name: event_time
user_column_name: %s
schedule: api
`, mainID, userCol)
		if err := os.WriteFile(filepath.Join(dir, "led.yaml"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeSpec("user_id")
	cfg := defaultConfig()
	cfg.ImportsDir = dir
	s := startServer(t, cfg)

	if r := waitRun(t, s, "led", manualSync(t, s, "led")); r.Status != "SUCCEEDED" || r.Imported != 3 {
		t.Fatalf("first run: %+v", r)
	}
	db.exec(t, `UPDATE led SET user_id = NULL WHERE id = 2`)
	time.Sleep(2100 * time.Millisecond) // past the join window
	if r := waitRun(t, s, "led", manualSync(t, s, "led")); r.Failed != 1 || r.Duplicates != 2 {
		t.Fatalf("run after the change: %+v", r)
	}
	type qrow struct {
		Key, Field, Reason string
		RunID              string `json:"run_id"`
		Row                map[string]any
	}
	quarantine := func() []qrow {
		t.Helper()
		rep := s.do(t, request{Method: http.MethodGet, Path: importPath("led") + "/quarantine", Auth: asOwner})
		var body struct{ Results struct{ Rows []qrow } }
		if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &body) != nil {
			t.Fatalf("quarantine: %s", rep)
		}
		return body.Results.Rows
	}
	q := quarantine()
	if len(q) != 1 || q[0].Key != "2" || q[0].Field != "user_id" || q[0].Row["account"] != "u2" || q[0].Row["user_id"] != nil {
		t.Fatalf("quarantine after the refusal: %+v", q)
	}
	if rep := s.do(t, request{Method: http.MethodGet, Path: importPath("led") + "/quarantine", Auth: noAuth}); rep.Status != http.StatusUnauthorized {
		t.Fatalf("quarantine without credentials: %s", rep)
	}

	// The fix: the user id is read from account, which the change left alone.
	writeSpec("account")
	s.Restart()
	rep := s.do(t, request{Method: http.MethodPost, Path: importPath("led") + "/quarantine/replay", Auth: asOwner, Body: []byte(`{}`)})
	var started struct {
		Results struct {
			RunID string `json:"run_id"`
		}
	}
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &started) != nil || started.Results.RunID == "" {
		t.Fatalf("replay: %s", rep)
	}
	r := waitRun(t, s, "led", started.Results.RunID)
	if r.Status != "SUCCEEDED" || r.Trigger != "replay" || r.RowsRead != 1 || r.Duplicates != 1 || r.Failed != 0 {
		t.Fatalf("replay run: %+v", r)
	}
	if q := quarantine(); len(q) != 0 {
		t.Fatalf("quarantine after the replay: %+v", q)
	}
	rep = s.do(t, request{Method: http.MethodGet, Path: importPath("led") + "/rows/" + url.PathEscape("2"), Auth: asOwner})
	var ledger struct {
		Results struct {
			Key  string
			Runs []struct {
				RunID   string `json:"run_id"`
				Outcome string
				Field   string
				Reason  string
			}
		}
	}
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &ledger) != nil {
		t.Fatalf("ledger of row 2: %s", rep)
	}
	var outcomes []string
	for _, e := range ledger.Results.Runs {
		outcomes = append(outcomes, e.Outcome)
	}
	if got := strings.Join(outcomes, ","); got != "duplicate,refused,imported" || ledger.Results.Runs[0].RunID != started.Results.RunID ||
		ledger.Results.Runs[1].Field != "user_id" {
		t.Fatalf("ledger of row 2: %s", rep.Body)
	}
	t.Logf("ledger of row 2 as served: %s", rep.Body)
	lines, perID := exportIDs(t, s)
	if lines != 3 || len(perID) != 3 {
		t.Fatalf("export holds %d events of %d ids, want 3 of 3", lines, len(perID))
	}
}

// A Mirror import's key inserted, updated, then deleted: the app API's
// ledger of the row shows the three outcomes, newest first.
func TestLedgerMirrorOutcomes(t *testing.T) {
	db := newPGDB(t)
	db.exec(t, `CREATE TABLE lm (id bigint PRIMARY KEY, user_id text NOT NULL, plan text, event_time timestamptz NOT NULL)`)
	db.exec(t, `INSERT INTO lm VALUES (7, 'u7', 'free', now() - interval '2 hours'), (8, 'u8', 'free', now() - interval '2 hours')`)
	t.Setenv("TRIBUTARY_IT_LM_DSN", db.dsn)
	dir := t.TempDir()
	spec := fmt.Sprintf(`id: lm
project_id: %d
import_type: event_stream
sync_mode: mirror
source: {kind: postgres, dsn: "${TRIBUTARY_IT_LM_DSN}"}
table_params: {table: lm}
event_name: plan
time_column_name: event_time
user_column_name: user_id
schedule: api
`, mainID)
	if err := os.WriteFile(filepath.Join(dir, "lm.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.ImportsDir = dir
	s := startServer(t, cfg)
	var runs []string
	for _, change := range []string{"", `UPDATE lm SET plan = 'pro' WHERE id = 7`, `DELETE FROM lm WHERE id = 7`} {
		if change != "" {
			db.exec(t, change)
			time.Sleep(2100 * time.Millisecond) // past the join window
		}
		id := manualSync(t, s, "lm")
		if r := waitRun(t, s, "lm", id); r.Status != "SUCCEEDED" {
			t.Fatalf("run after %q: %+v", change, r)
		}
		runs = append(runs, id)
	}
	rep := s.do(t, request{Method: http.MethodGet, Path: importPath("lm") + "/rows/7", Auth: asOwner})
	var ledger struct {
		Results struct {
			Runs []struct {
				RunID   string `json:"run_id"`
				Outcome string
			}
		}
	}
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &ledger) != nil {
		t.Fatalf("ledger of row 7: %s", rep)
	}
	var got []string
	for _, e := range ledger.Results.Runs {
		got = append(got, e.RunID+" "+e.Outcome)
	}
	want := []string{runs[2] + " deleted", runs[1] + " updated", runs[0] + " inserted"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ledger of row 7: %v, want %v (%s)", got, want, rep.Body)
	}
	t.Logf("ledger of row 7 as served: %s", rep.Body)
}
