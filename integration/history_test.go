package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"
)

// A History (SCD-2) people import created through the app API
// (sync_mode mirror_mode, history) from a real PostgreSQL table: engage
// shows each user's version current now, and export's where reads the
// version current at each event's time; a deleted version is reflected
// by the next run.
func TestHistoryTableEndToEnd(t *testing.T) {
	for _, kind := range []string{"embedded", "postgres"} {
		t.Run(kind, func(t *testing.T) { testHistoryTable(t, kind) })
	}
}

func testHistoryTable(t *testing.T, storeKind string) {
	db := newPGDB(t)
	db.exec(t, `CREATE TABLE plans (user_id text NOT NULL, valid_from timestamptz NOT NULL, plan text, seats int,
		PRIMARY KEY (user_id, valid_from))`)
	now := time.Now().UTC().Truncate(time.Second)
	db.exec(t, `INSERT INTO plans VALUES ('hu1', $1, 'free', 1), ('hu1', $2, 'pro', 5), ('hu2', $1, 'team', NULL)`,
		now.Add(-36*time.Hour), now.Add(-2*time.Hour))
	cfg := defaultConfig()
	if storeKind == "postgres" {
		cfg.Store = storeURL(t, newPGDB(t))
	}
	s := syncServerCfg(t, db, cfg)
	base := fmt.Sprintf("/api/app/projects/%d/warehouse-sources/imports", mainID)
	created := s.do(t, request{Path: base + "/people", Auth: asOwner, Body: []byte(`{"sync_mode":"mirror_mode",
		"warehouse_source_id":` + syncConn + `,"table_params":{"table":"plans"},"user_column_name":"user_id",
		"history":{"start_time_column_name":"valid_from"},"run_every":0}`)})
	if created.Status != http.StatusOK {
		t.Fatalf("create: %s", created)
	}
	var c struct{ Results map[string]any }
	if err := json.Unmarshal(created.Body, &c); err != nil {
		t.Fatal(err)
	}
	imp := fmt.Sprint(c.Results["id"])
	prev := ""
	sync := func(label string) {
		t.Helper()
		// A trigger within the join window of the last run joins it: wait
		// for a run of its own.
		id := manualSync(t, s, imp)
		for deadline := time.Now().Add(time.Minute); id == prev && time.Now().Before(deadline); id = manualSync(t, s, imp) {
			time.Sleep(250 * time.Millisecond)
		}
		if r := waitRun(t, s, imp, id); id == prev || r.Status != "SUCCEEDED" || r.Failed != 0 {
			t.Fatalf("%s: run %+v (the previous was %s)", label, r, prev)
		}
		prev = id
	}
	sync("first")

	evs := []any{
		event("buy", "hu1", "h-before", now.Add(-40*time.Hour), nil), // before hu1's first version
		event("buy", "hu1", "h-free", now.Add(-24*time.Hour), nil),
		event("buy", "hu1", "h-pro", now.Add(-time.Hour), nil),
		event("buy", "hu2", "h-team", now.Add(-time.Hour), nil),
	}
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), evs), len(evs))

	plans := func(label string, want map[string]string) {
		t.Helper()
		got := map[string]string{}
		for id, p := range engageProfiles(t, s, mainSecret, url.Values{"distinct_ids": {`["hu1","hu2"]`}}) {
			got[id] = fmt.Sprint(p["plan"], "/", p["seats"])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: engage plan/seats %v, want %v", label, got, want)
		}
	}
	asOf := func(label, where, want string) {
		t.Helper()
		var ids []string
		for _, e := range s.export(t, asOwner, mainID, url.Values{"event": {`["buy"]`}, "where": {where}}) {
			ids = append(ids, e.InsertID())
			if _, ok := e.Properties["$user.plan"]; ok {
				t.Fatalf("%s: an exported event carries $user.plan: %v", label, e.Properties)
			}
		}
		sort.Strings(ids)
		if fmt.Sprint(ids) != want {
			t.Fatalf("%s: export where %s: %v, want %s", label, where, ids, want)
		}
	}
	plans("first", map[string]string{"hu1": "pro/5", "hu2": "team/<nil>"})
	asOf("first", `properties["$user.plan"] == "pro"`, "[h-pro]")
	asOf("first", `properties["$user.plan"] == "free"`, "[h-free]")
	asOf("first", `not defined(properties["$user.plan"])`, "[h-before]")

	// hu1's pro version deleted: hu1 is free again, also as of h-pro.
	db.exec(t, `DELETE FROM plans WHERE user_id = 'hu1' AND plan = 'pro'`)
	sync("delete")
	if runs := mirrorHistory(t, s, imp); len(runs) != 2 || runs[0].Mirror == nil || runs[0].Mirror.Deleted != 1 {
		t.Fatalf("delete: the runs' mirror counts: %+v", runs)
	} else {
		t.Logf("delete run: %+v", *runs[0].Mirror)
	}
	plans("delete", map[string]string{"hu1": "free/1", "hu2": "team/<nil>"})
	asOf("delete", `properties["$user.plan"] == "free"`, "[h-free h-pro]")
}
