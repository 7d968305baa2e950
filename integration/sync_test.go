package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Warehouse syncs end to end: a real PostgreSQL table, the real server
// process, the app API over loopback.

const syncImport = "ev-sync"

// syncConn is the id of the connection to the sync tests' database:
// numeric, as the public API's warehouse_source_id is.
const syncConn = "1"

// syncServer starts a server whose imports_dir holds one time_based,
// API-triggered import of db's table ev, with the DSN from the
// environment as a secret must be, and whose config declares connection
// syncConn to db for the main project (imports created through the API
// name it).
func syncServer(t *testing.T, db *pgDB) *server {
	t.Helper()
	return syncServerCfg(t, db, defaultConfig())
}

func syncServerCfg(t *testing.T, db *pgDB, cfg serverConfig) *server {
	t.Helper()
	dir := t.TempDir()
	spec := fmt.Sprintf(`id: %s
project_id: %d
import_type: event_stream
sync_mode: time_based
source: {kind: postgres, dsn: "${TRIBUTARY_IT_SYNC_DSN}"}
table_params: {table: ev}
event_name: purchase
time_column_name: event_time
user_column_name: user_id
insert_id_column_name: id
insert_time_column_name: loaded_at
json_properties_column_name: props
schedule: api
`, syncImport, mainID)
	if err := os.WriteFile(filepath.Join(dir, "ev.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRIBUTARY_IT_SYNC_DSN", db.dsn) // the child inherits it
	cfg.ImportsDir = dir
	cfg.Connections = append(cfg.Connections, map[string]any{"id": syncConn, "kind": "postgres",
		"dsn": "${TRIBUTARY_IT_SYNC_DSN}", "projects": []int64{mainID}})
	return startServer(t, cfg)
}

func importPath(id string) string {
	return fmt.Sprintf("/api/app/projects/%d/warehouse-sources/imports/%s", mainID, id)
}

// manualSync triggers a run and returns its id.
func manualSync(t *testing.T, s *server, id string) string {
	t.Helper()
	r := s.do(t, request{Method: http.MethodPut, Path: importPath(id) + "/manual-sync", Auth: asOwner, Body: []byte(`{}`)})
	if r.Status != http.StatusOK {
		t.Fatalf("manual sync: %s", r)
	}
	var body struct {
		Status  string
		Results struct {
			RunID string `json:"run_id"`
		}
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Status != "ok" || body.Results.RunID == "" {
		t.Fatalf("manual sync body %s (%v)", r.Body, err)
	}
	return body.Results.RunID
}

type runRow struct {
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	StartTime  int64  `json:"start_time"`
	EndTime    *int64 `json:"end_time"`
	Imported   int64  `json:"num_events_imported"`
	RowsRead   int64  `json:"num_rows_read"`
	Failed     int64  `json:"num_rows_failed"`
	Duplicates int64  `json:"num_duplicates"`
	Trigger    string `json:"trigger"`
	Reason     string `json:"reason"`
}

func history(t *testing.T, s *server, id string) []runRow {
	t.Helper()
	r := s.do(t, request{Method: http.MethodGet, Path: importPath(id) + "/history", Auth: asOwner})
	if r.Status != http.StatusOK {
		t.Fatalf("history: %s", r)
	}
	var body struct {
		Status  string
		Results struct{ Runs []runRow }
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Status != "ok" {
		t.Fatalf("history body %s (%v)", r.Body, err)
	}
	return body.Results.Runs
}

func findRun(runs []runRow, id string) (runRow, bool) {
	for _, r := range runs {
		if r.RunID == id {
			return r, true
		}
	}
	return runRow{}, false
}

// waitRun polls the history until run id has finished.
func waitRun(t *testing.T, s *server, imp, id string) runRow {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if r, ok := findRun(history(t, s, imp), id); ok && r.Status != "RUNNING" {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s not finished after 5 minutes", id)
	return runRow{}
}

// exportIDs streams the project's export and counts each $insert_id.
func exportIDs(t *testing.T, s *server) (lines int, perID map[string]int) {
	t.Helper()
	q := url.Values{"from_date": {time.Now().UTC().AddDate(0, 0, -3).Format(time.DateOnly)},
		"to_date": {time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)}, "project_id": {fmt.Sprint(mainID)}}
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: q, Auth: asOwner})
	if r.Status != http.StatusOK {
		t.Fatalf("export: %s", r)
	}
	perID = map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		i := bytes.Index(line, []byte(`"$insert_id":"`))
		if i < 0 {
			t.Fatalf("exported event without $insert_id: %s", line)
		}
		rest := line[i+len(`"$insert_id":"`):]
		perID[string(rest[:bytes.IndexByte(rest, '"')])]++
	}
	return lines, perID
}

func wantExactlyOnce(t *testing.T, s *server, rows int) {
	t.Helper()
	lines, perID := exportIDs(t, s)
	dups := 0
	for _, n := range perID {
		if n > 1 {
			dups++
		}
	}
	if lines != rows || len(perID) != rows || dups != 0 {
		t.Fatalf("export holds %d events, %d distinct ids, %d ids more than once; want exactly one event per source row (%d)", lines, len(perID), dups, rows)
	}
}

// A sync killed with SIGKILL at random points, several times, and
// restarted: each interrupted run is FAILED (interrupted) after the
// restart, the next run resumes from the committed watermark, and the
// export ends with exactly one event per source row.
func TestSyncExactlyOnceAcrossKill9(t *testing.T) {
	const rows = 2_000_000
	db := newPGDB(t)
	db.eventTable(t, rows)
	s := syncServer(t, db)
	var killed []string
	for round := 0; round < 3; round++ {
		id := manualSync(t, s, syncImport)
		// Kill once the run is well under way, at a random point.
		deadline := time.Now().Add(2 * time.Minute)
		target := int64(rand.IntN(rows/5) + 20_000)
		for {
			r, _ := findRun(history(t, s, syncImport), id)
			if r.Status != "RUNNING" {
				t.Fatalf("round %d: run %s ended before the kill: %+v", round, id, r)
			}
			if r.RowsRead >= target || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
		}
		s.Kill()
		s.Start()
		killed = append(killed, id)
		r, ok := findRun(history(t, s, syncImport), id)
		if !ok || r.Status != "FAILED" || !strings.Contains(r.Reason, "interrupted") {
			t.Fatalf("round %d: killed run after restart: %+v (found %v); want FAILED, interrupted", round, r, ok)
		}
	}
	final := waitRun(t, s, syncImport, manualSync(t, s, syncImport))
	if final.Status != "SUCCEEDED" || final.Failed != 0 {
		t.Fatalf("final run: %+v", final)
	}
	if final.RowsRead >= rows {
		t.Fatalf("the final run read %d rows: it did not resume from a committed watermark", final.RowsRead)
	}
	t.Logf("runs killed: %v; the final run read %d of %d rows", killed, final.RowsRead, rows)
	wantExactlyOnce(t, s, rows)
	// Rows added later, sharing the last insert time, are picked up.
	db.addRows(t, rows+1, rows+700)
	if r := waitRun(t, s, syncImport, manualSync(t, s, syncImport)); r.Status != "SUCCEEDED" || r.Imported != 700 {
		t.Fatalf("incremental run: %+v; want 700 imported", r)
	}
	wantExactlyOnce(t, s, rows+700)
}

// The source drops every connection mid-run (pg_terminate_backend): the
// run retries from its committed watermark and completes exactly.
func TestSyncSurvivesSourceOutage(t *testing.T) {
	const rows = 600_000
	db := newPGDB(t)
	db.eventTable(t, rows)
	s := syncServer(t, db)
	id := manualSync(t, s, syncImport)
	terminated := 0
	for terminated == 0 {
		r, _ := findRun(history(t, s, syncImport), id)
		if r.Status != "RUNNING" {
			t.Fatalf("run ended before the outage: %+v", r)
		}
		if r.RowsRead > 50_000 {
			var n int
			err := db.conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = $1 AND pid <> pg_backend_pid()`, db.name).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			terminated = n
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := waitRun(t, s, syncImport, id)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run after %d connections were terminated: %+v", terminated, r)
	}
	if !strings.Contains(s.logs.String(), "transient source error, retrying") {
		t.Fatalf("the run did not retry after the outage; logs:\n%s", s.logs.String())
	}
	wantExactlyOnce(t, s, rows)
}
