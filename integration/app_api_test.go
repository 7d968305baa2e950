package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	consumerSA  = "it-consumer"
	consumerSec = "it-consumer-secret-1"
)

func appConfig() serverConfig {
	cfg := defaultConfig()
	cfg.Projects[0].ServiceAccounts = append(cfg.Projects[0].ServiceAccounts, saConfig{consumerSA, consumerSec, "consumer"})
	return cfg
}

// createBody is an event-stream import of db's table ev, as the app API
// takes it: the import file's fields in JSON naming the operator's
// connection, with run_every.
func createBody(extra string) []byte {
	return []byte(`{"sync_mode":"time_based","warehouse_source_id":` + syncConn + `,
		"table_params":{"table":"ev"},"event_name":"purchase","time_column_name":"event_time","user_column_name":"user_id",
		"insert_id_column_name":"id","insert_time_column_name":"loaded_at","run_every":0` + extra + `}`)
}

// Every app API route refuses missing or wrong credentials, a service
// account of another project and a project secret with 401, and a
// consumer's writes with 403; nothing changes.
func TestAppAPIAuthMatrix(t *testing.T) {
	db := newPGDB(t)
	db.eventTable(t, 1000)
	s := syncServerCfg(t, db, appConfig())
	base := fmt.Sprintf("/api/app/projects/%d/warehouse-sources/imports", mainID)
	routes := []struct {
		method, path string
		body         []byte
		write        bool
	}{
		{http.MethodGet, base, nil, false},
		{http.MethodGet, base + "/" + syncImport, nil, false},
		{http.MethodGet, base + "/" + syncImport + "/history", nil, false},
		{http.MethodPatch, base + "/" + syncImport, []byte(`{"paused":true}`), true},
		{http.MethodDelete, base + "/" + syncImport, []byte(`{}`), true},
		{http.MethodPost, base + "/event-stream", createBody(""), true},
		{http.MethodPut, base + "/" + syncImport + "/manual-sync", []byte(`{}`), true},
	}
	refusals := []struct {
		name   string
		auth   authFn
		status int
		writes bool // only refused for writes
	}{
		{"no credentials", noAuth, 401, false},
		{"wrong secret", basicAuth(ownerSA, "not-the-secret"), 401, false},
		{"unknown account", basicAuth("nobody", "x"), 401, false},
		{"account of another project", basicAuth(euSA, euSASecret), 401, false},
		{"project secret", basicAuth(mainSecret, ""), 401, false},
		{"consumer", basicAuth(consumerSA, consumerSec), 403, true},
		{"analyst", basicAuth(analystSA, analystSec), 403, true},
	}
	for _, rt := range routes {
		for _, rf := range refusals {
			if rf.writes && !rt.write {
				r := s.do(t, request{Method: rt.method, Path: rt.path, Auth: rf.auth, Body: rt.body})
				if r.Status != http.StatusOK {
					t.Errorf("%s %s as %s (a read): %s, want 200", rt.method, rt.path, rf.name, r)
				}
				continue
			}
			r := s.do(t, request{Method: rt.method, Path: rt.path, Auth: rf.auth, Body: rt.body})
			var body map[string]any
			_ = json.Unmarshal(r.Body, &body)
			if r.Status != rf.status || body["status"] != "error" || body["error"] == "" {
				t.Errorf("%s %s as %s: %s, want %d {error, status: error}", rt.method, rt.path, rf.name, r, rf.status)
			}
		}
	}
	// Nothing changed: one import, not paused, never run.
	var list struct{ Results []map[string]any }
	_ = json.Unmarshal(s.do(t, request{Method: http.MethodGet, Path: base, Auth: asOwner}).Body, &list)
	if len(list.Results) != 1 || list.Results[0]["paused"] != false {
		t.Fatalf("imports after refused requests: %+v", list.Results)
	}
	if runs := history(t, s, syncImport); len(runs) != 0 {
		t.Fatalf("refused requests started runs: %+v", runs)
	}
}

// 50 simultaneous manual syncs make one run; the 6th API-triggered run of
// the hour is refused with 429.
func TestManualSyncConcurrentAndLimit(t *testing.T) {
	db := newPGDB(t)
	db.eventTable(t, 20_000)
	s := syncServer(t, db)
	ids := make([]string, 50)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := s.do(t, request{Method: http.MethodPut, Path: importPath(syncImport) + "/manual-sync", Auth: asOwner, Body: []byte(`{}`)})
			var body struct {
				Results struct {
					RunID string `json:"run_id"`
				}
			}
			if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
				t.Errorf("manual sync %d: %s", i, r)
			}
			ids[i] = body.Results.RunID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Fatalf("50 concurrent manual syncs returned run ids %v; want one run", ids)
		}
	}
	if r := waitRun(t, s, syncImport, ids[0]); r.Status != "SUCCEEDED" || r.Imported != 20_000 || r.Trigger != "api" {
		t.Fatalf("the run: %+v", r)
	}
	for i := 2; i <= 5; i++ {
		time.Sleep(2100 * time.Millisecond) // past the join window of the last run
		if r := waitRun(t, s, syncImport, manualSync(t, s, syncImport)); r.Status != "SUCCEEDED" {
			t.Fatalf("run %d: %+v", i, r)
		}
	}
	time.Sleep(2100 * time.Millisecond)
	r := s.do(t, request{Method: http.MethodPut, Path: importPath(syncImport) + "/manual-sync", Auth: asOwner, Body: []byte(`{}`)})
	if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"status":"error"`) {
		t.Fatalf("6th API sync within the hour: %s, want 429", r)
	}
	if runs := history(t, s, syncImport); len(runs) != 5 {
		t.Fatalf("history has %d runs, want 5", len(runs))
	}
}

// Imports created through the API are listed beside file imports, can be
// paused, rescheduled and deleted; the responses match the public
// OpenAPI document for imports with numeric ids.
func TestAppAPIImportLifecycle(t *testing.T) {
	db := newPGDB(t)
	db.eventTable(t, 3000)
	s := syncServer(t, db)
	_, router := loadSpec(t, "warehouse-connectors.openapi.yaml", s.URL+"/api/app")
	base := fmt.Sprintf("/api/app/projects/%d/warehouse-sources/imports", mainID)
	check := func(method, path string, r reply) {
		t.Helper()
		checkResponse(t, router, method, s.URL+path, r)
	}

	// An inline source is refused (with or without a literal secret); a
	// connection of the config is taken.
	lit := s.do(t, request{Path: base + "/event-stream", Auth: asOwner,
		Body: []byte(`{"source":{"kind":"postgres","dsn":"postgres://u:hunter2@h/db"},"table_params":{"table":"ev"},"time_column_name":"event_time","sync_mode":"full_sync"}`)})
	if lit.Status != http.StatusBadRequest || strings.Contains(string(lit.Body), "hunter2") {
		t.Fatalf("literal secret: %s", lit)
	}
	created := s.do(t, request{Path: base + "/event-stream", Auth: asOwner, Body: createBody("")})
	if created.Status != http.StatusOK {
		t.Fatalf("create: %s", created)
	}
	check(http.MethodPost, base+"/event-stream", created)
	var c struct{ Results map[string]any }
	_ = json.Unmarshal(created.Body, &c)
	id := fmt.Sprint(c.Results["id"])
	if id != "1" || c.Results["origin"] != "api" || c.Results["run_every"] != float64(0) {
		t.Fatalf("created import: %s", created.Body)
	}
	got := s.do(t, request{Method: http.MethodGet, Path: base + "/" + id, Auth: asOwner})
	check(http.MethodGet, base+"/"+id, got)
	if strings.Contains(string(got.Body), db.dsn) {
		t.Fatal("the import's view shows the connection string")
	}
	sync := s.do(t, request{Method: http.MethodPut, Path: base + "/" + id + "/manual-sync", Auth: asOwner, Body: []byte(`{}`)})
	check(http.MethodPut, base+"/"+id+"/manual-sync", sync)
	var sr struct {
		Results struct {
			RunID string `json:"run_id"`
		}
	}
	_ = json.Unmarshal(sync.Body, &sr)
	if r := waitRun(t, s, id, sr.Results.RunID); r.Status != "SUCCEEDED" || r.Imported != 3000 {
		t.Fatalf("run of the API import: %+v", r)
	}
	hist := s.do(t, request{Method: http.MethodGet, Path: base + "/" + id + "/history", Auth: asOwner})
	check(http.MethodGet, base+"/"+id+"/history", hist)

	// Pause: manual syncs are refused; PATCH with the public fields.
	patch := s.do(t, request{Method: http.MethodPatch, Path: base + "/" + id, Auth: asOwner, Body: []byte(`{"paused":true,"run_every":86400000000000}`)})
	if patch.Status != http.StatusOK || !strings.Contains(string(patch.Body), `"schedule":"@daily"`) {
		t.Fatalf("patch: %s", patch)
	}
	if r := s.do(t, request{Method: http.MethodPut, Path: base + "/" + id + "/manual-sync", Auth: asOwner}); r.Status != http.StatusConflict {
		t.Fatalf("manual sync of a paused import: %s, want 409", r)
	}
	if r := s.do(t, request{Method: http.MethodPatch, Path: base + "/" + id, Auth: asOwner, Body: []byte(`{"run_every":5}`)}); r.Status != http.StatusBadRequest {
		t.Fatalf("bad run_every: %s", r)
	}
	// The change survives a restart; the file import is listed beside it.
	s.Restart()
	var list struct{ Results []map[string]any }
	_ = json.Unmarshal(s.do(t, request{Method: http.MethodGet, Path: base, Auth: asOwner}).Body, &list)
	if len(list.Results) != 2 || list.Results[0]["origin"] != "api" || list.Results[0]["paused"] != true || list.Results[1]["origin"] != "file" {
		t.Fatalf("list after restart: %+v", list.Results)
	}
	if r := s.do(t, request{Method: http.MethodDelete, Path: base + "/" + id, Auth: asOwner, Body: []byte(`{"delete_data":false}`)}); r.Status != http.StatusOK {
		t.Fatalf("delete: %s", r)
	}
	if r := s.do(t, request{Method: http.MethodGet, Path: base + "/" + id, Auth: asOwner}); r.Status != http.StatusNotFound {
		t.Fatalf("deleted import: %s, want 404", r)
	}
}
