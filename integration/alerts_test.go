package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// alertReceiver is a webhook receiver on loopback that answers 503 while
// down and keeps what it accepted by Idempotency-Key.
type alertReceiver struct {
	srv   *httptest.Server
	down  atomic.Bool
	tried atomic.Int64
	mu    sync.Mutex
	got   map[string]string // key → kind
	dups  int
	first map[string][]byte // kind → the first body accepted
}

func newAlertReceiver(t *testing.T) *alertReceiver {
	r := &alertReceiver{got: map[string]string{}, first: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.tried.Add(1)
		body, _ := io.ReadAll(req.Body)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var p struct{ Kind string }
		_ = json.Unmarshal(body, &p)
		r.mu.Lock()
		defer r.mu.Unlock()
		key := req.Header.Get("Idempotency-Key")
		if _, ok := r.got[key]; ok {
			r.dups++
		}
		r.got[key] = p.Kind
		if r.first[p.Kind] == nil {
			r.first[p.Kind] = body
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *alertReceiver) kinds() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, k := range r.got {
		out[k]++
	}
	return out, r.dups
}

func (r *alertReceiver) waitKind(t *testing.T, kind string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if k, _ := r.kinds(); k[kind] > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	k, _ := r.kinds()
	t.Fatalf("no %s alert after 60s; got %v", kind, k)
}

// An alert raised by a run's end survives a SIGKILL of the server before
// its delivery, and reaches the receiver once after the restart; the
// next success raises one recovery notice.
func TestAlertDeliveredOnceAcrossKill9(t *testing.T) {
	db := newPGDB(t)
	hook := newAlertReceiver(t)
	hook.down.Store(true)
	t.Setenv("TRIBUTARY_IT_ALERT_URL", hook.srv.URL+"/tributary") // the child inherits it
	cfg := defaultConfig()
	cfg.Projects[0].Alerts = map[string]any{
		"destinations": []map[string]any{{"name": "hook", "kind": "webhook", "url": "${TRIBUTARY_IT_ALERT_URL}"}},
		"retry":        map[string]any{"base": "100ms", "max": "500ms", "attempts": 100},
	}
	s := syncServerCfg(t, db, cfg)
	// No table yet: the run fails (a missing table is permanent: no retries).
	run := waitRun(t, s, syncImport, manualSync(t, s, syncImport))
	if run.Status != "FAILED" {
		t.Fatalf("run on a missing table: %+v", run)
	}
	// The alert is in the outbox and being tried against a dead receiver.
	for deadline := time.Now().Add(30 * time.Second); hook.tried.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the failure alert was never attempted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill()
	hook.down.Store(false)
	s.Start()
	hook.waitKind(t, "run_failed")
	db.eventTable(t, 20)
	if run := waitRun(t, s, syncImport, manualSync(t, s, syncImport)); run.Status != "SUCCEEDED" {
		t.Fatalf("run after the table exists: %+v", run)
	}
	hook.waitKind(t, "run_recovered")
	time.Sleep(time.Second) // a redelivery would come within the retry's max
	kinds, dups := hook.kinds()
	if dups != 0 || len(kinds) != 2 || kinds["run_failed"] != 1 || kinds["run_recovered"] != 1 {
		t.Fatalf("receiver got %v with %d duplicates; want one run_failed and one run_recovered", kinds, dups)
	}
	hook.mu.Lock()
	t.Logf("run_failed as received after the restart: %s", hook.first["run_failed"])
	hook.mu.Unlock()
	page := s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: asOwner})
	for _, want := range []string{`tributary_alerts_sent_total{destination="hook",kind="run_recovered",project="1"} 1`,
		`tributary_sync_last_run_status{import="ev-sync",project="1",status="SUCCEEDED"} 1`} {
		if !strings.Contains(string(page.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A source table truncated between runs of a full_sync import with
// volume action: pause: the run stops before it imports anything, the
// app API shows the import paused and why, one alert names the anomaly,
// and PATCH paused:false resumes it and clears the reason.
func TestAlertVolumePausesTruncatedImport(t *testing.T) {
	db := newPGDB(t)
	db.eventTable(t, 30)
	hook := newAlertReceiver(t)
	t.Setenv("TRIBUTARY_IT_ALERT_URL", hook.srv.URL+"/tributary")
	t.Setenv("TRIBUTARY_IT_SYNC_DSN", db.dsn)
	dir := t.TempDir()
	spec := fmt.Sprintf(`id: ev-full
project_id: %d
import_type: event_stream
sync_mode: full_sync
source: {kind: postgres, dsn: "${TRIBUTARY_IT_SYNC_DSN}"}
table_params: {table: ev}
event_name: purchase
time_column_name: event_time
user_column_name: user_id
insert_id_column_name: id
schedule: api
`, mainID)
	if err := os.WriteFile(filepath.Join(dir, "ev.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.ImportsDir = dir
	cfg.Projects[0].Alerts = map[string]any{
		"destinations": []map[string]any{{"name": "hook", "kind": "webhook", "url": "${TRIBUTARY_IT_ALERT_URL}"}},
		"rules":        map[string]any{"volume": map[string]any{"min_runs": 2, "action": "pause"}},
	}
	s := startServer(t, cfg)
	for i := 0; i < 2; i++ {
		if r := waitRun(t, s, "ev-full", manualSync(t, s, "ev-full")); r.Status != "SUCCEEDED" || r.RowsRead != 30 {
			t.Fatalf("run %d: %+v", i, r)
		}
		time.Sleep(2100 * time.Millisecond) // past the join window
	}
	db.exec(t, `DELETE FROM ev`)
	r := waitRun(t, s, "ev-full", manualSync(t, s, "ev-full"))
	if r.Status != "CANCELLED" || r.RowsRead != 0 || r.Imported != 0 || !strings.Contains(r.Reason, "volume anomaly") {
		t.Fatalf("run on the truncated table: %+v", r)
	}
	var view struct {
		Paused       bool   `json:"paused"`
		PausedReason string `json:"paused_reason"`
	}
	get := func() {
		t.Helper()
		rep := s.do(t, request{Method: http.MethodGet, Path: importPath("ev-full"), Auth: asOwner})
		view.Paused, view.PausedReason = false, ""
		if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &struct{ Results any }{&view}) != nil {
			t.Fatalf("import: %s", rep)
		}
	}
	get()
	if !view.Paused || !strings.Contains(view.PausedReason, "volume rule") {
		t.Fatalf("import after the anomaly: %+v", view)
	}
	if rep := s.do(t, request{Method: http.MethodPut, Path: importPath("ev-full") + "/manual-sync", Auth: asOwner, Body: []byte(`{}`)}); rep.Status == http.StatusOK {
		t.Fatalf("a paused import ran: %s", rep)
	}
	hook.waitKind(t, "volume_anomaly")
	time.Sleep(500 * time.Millisecond)
	if kinds, dups := hook.kinds(); len(kinds) != 1 || kinds["volume_anomaly"] != 1 || dups != 0 {
		t.Fatalf("receiver got %v (%d duplicates), want one volume_anomaly", kinds, dups)
	}
	hook.mu.Lock()
	t.Logf("volume_anomaly as received: %s", hook.first["volume_anomaly"])
	hook.mu.Unlock()
	if lines, _ := exportIDs(t, s); lines != 30 {
		t.Errorf("export holds %d events after the held run, want 30", lines)
	}
	if rep := s.do(t, request{Method: http.MethodPatch, Path: importPath("ev-full"), Auth: asOwner, Body: []byte(`{"paused":false}`)}); rep.Status != http.StatusOK {
		t.Fatalf("resume: %s", rep)
	}
	get()
	if view.Paused || view.PausedReason != "" {
		t.Fatalf("import after resuming: %+v", view)
	}
}
