package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Mirror import created through the app API (sync_mode mirror_mode)
// of a Postgres table, its runs killed with SIGKILL at random points
// while the table gains inserts, updates (properties, times, users) and
// deletes: after each final run the export holds exactly the table, one
// event per row in its current version, and the history counts the
// changes.
func TestMirrorExactAcrossKill9(t *testing.T) {
	for _, kind := range []string{"embedded", "postgres"} {
		t.Run(kind, func(t *testing.T) { testMirrorKill9(t, kind) })
	}
}

func testMirrorKill9(t *testing.T, storeKind string) {
	const rows = 80_000
	s, db, imp := mirrorKillSetup(t, storeKind, rows)
	// newRun triggers a run that reads the table as it is now: a trigger
	// within the join window (2 s) of the last run's start joins that run
	// (on the embedded store a restart starts a recovery run at once, so
	// the next trigger can land in its window), so it waits that out.
	seen := map[string]bool{}
	newRun := func(label string) string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			id := manualSync(t, s, imp)
			if !seen[id] {
				seen[id] = true
				return id
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: every trigger for 10 s joined run %s", label, id)
			}
		}
	}

	// killedRun starts a run and kills the server at a random point of it
	// (or lets it end when it is faster), then restarts it.
	killedRun := func(label string, of int) {
		t.Helper()
		id := newRun(label)
		target := int64(rand.IntN(of/2) + 1000)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			r, _ := findRun(history(t, s, imp), id)
			if r.Status != "RUNNING" {
				t.Logf("%s: run %s ended (%s) before the kill", label, id, r.Status)
				break
			}
			if r.RowsRead >= target || time.Now().After(deadline) {
				t.Logf("%s: killing run %s at %d rows read", label, id, r.RowsRead)
				break
			}
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		}
		s.Kill()
		s.Start()
		// Until the restarted process has marked the killed run ended, a
		// trigger would join it.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			if r, _ := findRun(history(t, s, imp), id); r.Status != "RUNNING" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: killed run %s still RUNNING a minute after the restart", label, id)
			}
		}
	}
	finalRun := func(label string) mirrorRunRow {
		t.Helper()
		id := newRun(label)
		if r := waitRun(t, s, imp, id); r.Status != "SUCCEEDED" || r.Failed != 0 {
			t.Fatalf("%s: final run %+v", label, r)
		}
		for _, r := range mirrorHistory(t, s, imp) {
			if r.RunID == id {
				return r
			}
		}
		t.Fatalf("%s: run %s not in the history", label, id)
		return mirrorRunRow{}
	}

	killedRun("first load", rows)
	finalRun("first load")
	wantTable(t, s, db, "first load")

	// 1% updated (a property; every third also its time and user), 0.5%
	// deleted, 1000 new rows; a key deleted and inserted again.
	db.exec(t, `UPDATE ev SET props = props || '{"plan":"changed"}' WHERE id % 100 = 0`)
	db.exec(t, `UPDATE ev SET event_time = event_time + interval '1 minute', user_id = 'moved' || id WHERE id % 300 = 0`)
	db.exec(t, `DELETE FROM ev WHERE id % 200 = 1`)
	db.addRows(t, rows+1, rows+1000)
	// The change feed would read only the ~2,000 changed rows, too few to
	// kill a run among them: dropping its slot by hand makes each of these
	// runs re-diff the whole table (the feed's own kills are in
	// mirror_kill_deletes_test.go).
	dropSlots := func() {
		db.exec(t, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND NOT active`)
	}
	dropSlots()
	killedRun("changes 1", rows)
	dropSlots()
	killedRun("changes 2", rows)
	last := finalRun("changes")
	wantTable(t, s, db, "changes")
	if last.Mirror == nil {
		t.Fatalf("the final run's history has no mirror counts: %+v", last)
	}
	t.Logf("final run after the kills: %+v", *last.Mirror)

	// A quiet run changes nothing: served by the change feed it reads no
	// row; re-diffing the table, it finds every row unchanged.
	quiet := finalRun("quiet")
	want := int64(rows + 1000 - rows/200)
	if m := quiet.Mirror; m == nil || m.Inserted+m.Updated+m.Deleted != 0 || (m.Unchanged != want && m.Unchanged != 0) {
		t.Fatalf("quiet run counts %+v, want nothing changed (%d unchanged, or none read through the feed)", quiet.Mirror, want)
	}
}

// mirrorKillSetup serves a Postgres table ev of n rows through a Mirror
// import created over the app API, on the embedded store or on a
// Postgres store whose killed runs are taken over once their lease
// (3 s) lapses; it returns the server, the source and the import's id.
func mirrorKillSetup(t *testing.T, storeKind string, n int) (*server, *pgDB, string) {
	t.Helper()
	db := newPGDB(t)
	db.eventTable(t, n)
	cfg := defaultConfig()
	if storeKind == "postgres" {
		// A killed run is taken over once its lease lapses.
		cfg.Store, cfg.SyncLease = storeURL(t, newPGDB(t)), "3s"
	}
	s := syncServerCfg(t, db, cfg)
	base := fmt.Sprintf("/api/app/projects/%d/warehouse-sources/imports", mainID)
	created := s.do(t, request{Path: base + "/event-stream", Auth: asOwner, Body: []byte(`{"sync_mode":"mirror_mode",
		"warehouse_source_id":` + syncConn + `,"table_params":{"table":"ev"},"event_name":"purchase",
		"time_column_name":"event_time","user_column_name":"user_id","json_properties_column_name":"props","run_every":0}`)})
	if created.Status != http.StatusOK {
		t.Fatalf("create: %s", created)
	}
	var c struct{ Results map[string]any }
	if err := json.Unmarshal(created.Body, &c); err != nil {
		t.Fatal(err)
	}
	imp := fmt.Sprint(c.Results["id"])
	return s, db, imp
}

type mirrorRunRow struct {
	RunID  string `json:"run_id"`
	Mirror *struct {
		Inserted  int64 `json:"num_inserted"`
		Updated   int64 `json:"num_updated"`
		Deleted   int64 `json:"num_deleted"`
		Unchanged int64 `json:"num_unchanged"`
	} `json:"mirror"`
}

func mirrorHistory(t *testing.T, s *server, id string) []mirrorRunRow {
	t.Helper()
	r := s.do(t, request{Method: http.MethodGet, Path: importPath(id) + "/history", Auth: asOwner})
	var body struct {
		Results struct{ Runs []mirrorRunRow }
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
		t.Fatalf("history: %s", r)
	}
	return body.Results.Runs
}

// wantTable compares the export with table ev: one event per row, with
// the row's time, user and plan.
func wantTable(t *testing.T, s *server, db *pgDB, step string) {
	t.Helper()
	type version struct {
		ms   int64
		user string
		plan string
	}
	want := map[int64]version{}
	rows, err := db.conn.Query(context.Background(), `SELECT id, floor(extract(epoch FROM event_time) * 1000)::bigint, user_id, props->>'plan' FROM ev`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var v version
		if err := rows.Scan(&id, &v.ms, &v.user, &v.plan); err != nil {
			t.Fatal(err)
		}
		want[id] = v
	}
	rows.Close()
	q := url.Values{"from_date": {time.Now().UTC().AddDate(0, 0, -3).Format(time.DateOnly)},
		"to_date": {time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)}, "project_id": {fmt.Sprint(mainID)}}
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: q, Auth: asOwner})
	if r.Status != http.StatusOK {
		t.Fatalf("%s: export: %s", step, r)
	}
	seen := map[int64]bool{}
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		var ev struct {
			Properties struct {
				ID         int64   `json:"id"`
				Time       float64 `json:"time"`
				DistinctID string  `json:"distinct_id"`
				Plan       string  `json:"plan"`
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v: %s", step, err, sc.Bytes())
		}
		p := ev.Properties
		w, ok := want[p.ID]
		ms := int64(p.Time)
		if p.Time < 1e11 {
			ms = int64(math.Round(p.Time * 1000))
		}
		switch {
		case !ok:
			t.Fatalf("%s: exported event of row %d, which the table does not hold: %s", step, p.ID, sc.Bytes())
		case seen[p.ID]:
			t.Fatalf("%s: row %d exported twice", step, p.ID)
		case ms/1000 != w.ms/1000 || p.DistinctID != w.user || p.Plan != w.plan:
			t.Fatalf("%s: row %d exported as (%d, %s, %s), the table holds (%d, %s, %s)", step, p.ID, ms, p.DistinctID, p.Plan, w.ms, w.user, w.plan)
		}
		seen[p.ID] = true
	}
	if n != len(want) {
		t.Fatalf("%s: export holds %d events, the table %d rows", step, n, len(want))
	}
}

// Two server processes share one PostgreSQL store and schedule the same
// Mirror import every 2 s while its table changes: no period runs twice,
// no two runs of the import overlap (the run lock every sync takes), and
// once the changes stop the export equals the table.
func TestPGTwoProcessesMirror(t *testing.T) {
	if testing.Short() {
		t.Skip("half a minute of two processes")
	}
	const rows = 20_000
	src, st := newPGDB(t), newPGDB(t)
	src.eventTable(t, rows)
	dir := t.TempDir()
	spec := fmt.Sprintf(`id: mir
project_id: %d
import_type: event_stream
sync_mode: mirror
source: {kind: postgres, dsn: "${TRIBUTARY_IT_MIR_DSN}"}
table_params: {table: ev}
event_name: purchase
time_column_name: event_time
user_column_name: user_id
json_properties_column_name: props
schedule: "@every 2s"
`, mainID)
	if err := os.WriteFile(filepath.Join(dir, "mir.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRIBUTARY_IT_MIR_DSN", src.dsn)
	cfg := defaultConfig()
	cfg.ImportsDir, cfg.Store, cfg.SyncLease, cfg.MinScheduleInterval = dir, storeURL(t, st), "5s", "2s"
	servers := startCluster(t, 2, cfg)
	next := rows
	for k := range 15 {
		src.exec(t, fmt.Sprintf(`UPDATE ev SET props = props || '{"plan":"round%d"}' WHERE id %% 97 = %d`, k, k))
		src.exec(t, fmt.Sprintf(`DELETE FROM ev WHERE id %% 101 = %d`, k))
		src.addRows(t, next+1, next+50)
		next += 50
		time.Sleep(time.Second)
	}
	lastChange := time.Now().UnixMilli()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done := false
		for _, r := range storeRuns(t, st) {
			done = done || (r.Status == "SUCCEEDED" && r.StartedMs > lastChange)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mirror run started after the last change succeeded: %+v", storeRuns(t, st))
		}
		time.Sleep(500 * time.Millisecond)
	}
	runs := storeRuns(t, st)
	periods := map[string]string{}
	owners := map[string]int{}
	for i, r := range runs {
		owners[r.Owner]++
		if r.Period != "" {
			if other, dup := periods[r.Period]; dup {
				t.Fatalf("period %s ran twice: %s and %s", r.Period, other, r.ID)
			}
			periods[r.Period] = r.ID
		}
		if i > 0 && runs[i-1].EndedMs > r.StartedMs {
			t.Fatalf("runs %s and %s of the import overlap: %+v, %+v", runs[i-1].ID, r.ID, runs[i-1], r)
		}
		if r.Status != "SUCCEEDED" && r.Status != "RUNNING" {
			t.Fatalf("run %s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	t.Logf("%d mirror runs, by owner %v", len(runs), owners)
	wantTable(t, servers[0], src, "after the changes")
	wantTable(t, servers[1], src, "after the changes, read through the other process")
}
