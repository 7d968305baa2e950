package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// hookReceiver is a webhook on loopback keeping what it accepted by
// Idempotency-Key; mode "down" answers 503, "hang" never answers (until
// the client gives up).
type hookReceiver struct {
	mu    sync.Mutex
	mode  string
	tried int
	got   map[string]string // key → kind
	dups  int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{got: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.tried++
		mode := r.mode
		r.mu.Unlock()
		switch mode {
		case "down":
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case "hang":
			<-req.Context().Done()
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
	}))
	t.Cleanup(srv.Close)
	t.Setenv("TRIBUTARY_TEST_ALERT_URL", srv.URL+"/hook")
	return r
}

func (r *hookReceiver) set(mode string) {
	r.mu.Lock()
	r.mode = mode
	r.mu.Unlock()
}

func (r *hookReceiver) attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tried
}

// kinds counts what was accepted by kind, with the duplicates received.
func (r *hookReceiver) kinds() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, k := range r.got {
		out[k]++
	}
	return out, r.dups
}

func (r *hookReceiver) want(t *testing.T, step string, want map[string]int) {
	t.Helper()
	got, dups := r.kinds()
	if dups != 0 || len(got) != len(want) {
		t.Fatalf("%s: receiver got %v with %d duplicates, want %v", step, got, dups, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: receiver got %v, want %v", step, got, want)
		}
	}
}

// alertsDemo is the demo with a webhook destination (and rules) added
// to project 1.
func alertsDemo(t *testing.T, rules string) string {
	dir := demoDir(t)
	cfgPath := filepath.Join(dir, "configs", "tributary.yaml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	alerts := `      bytes_per_minute: 2GB
    alerts:
      destinations:
        - {name: hook, kind: webhook, url: "${TRIBUTARY_TEST_ALERT_URL}", timeout: 5m}
      retry: {base: 10ms, max: 20ms, attempts: 100}
` + rules
	text := strings.Replace(string(b), "      bytes_per_minute: 2GB\n", alerts, 1)
	if text == string(b) {
		t.Fatal("the demo config changed: no rate_limit to add the alerts after")
	}
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// syncOnce runs `tributary sync` and returns its error and stderr.
func syncOnce(t *testing.T, args ...string) (error, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := syncCmd(context.Background(), append([]string{"--quiet"}, args...), &out, &errOut)
	return err, out.String() + errOut.String()
}

// The CLI's runs raise the alerts serve's would: a failure, one notice;
// the next success, one recovery. An alert the receiver refused, or did
// not answer within --alert-wait, stays in the outbox and the next
// invocation delivers it, once; the sync never fails for it.
func TestSyncRaisesAndDeliversAlerts(t *testing.T) {
	hook := newHookReceiver(t)
	dir := alertsDemo(t, "")
	good := filepath.Join("configs", "imports", "demo-events.yaml")
	b, _ := os.ReadFile(good)
	bad := filepath.Join(dir, "configs", "imports", "missing.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "main.app_events", "main.no_such_table", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// missing.yaml has the same import id: it is the same import, its table gone.
	if err, out := syncOnce(t, "-c", bad); err == nil {
		t.Fatalf("a sync of a missing table succeeded:\n%s", out)
	}
	hook.want(t, "after a failed sync", map[string]int{"run_failed": 1})
	if err, out := syncOnce(t, "-c", bad); err == nil {
		t.Fatalf("a sync of a missing table succeeded:\n%s", out)
	}
	hook.want(t, "after a second failed sync", map[string]int{"run_failed": 1})
	if err, out := syncOnce(t, "-c", good); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hook.want(t, "after the recovery", map[string]int{"run_failed": 1, "run_recovered": 1})

	// Receiver down: the sync ends as it would without alerts, saying
	// the alert waits; the next one delivers it with its own.
	hook.set("down")
	before := hook.attempts()
	err, out := syncOnce(t, "-c", bad)
	if err == nil || !strings.Contains(out, "1 alert(s) not delivered") {
		t.Fatalf("sync with the receiver down: %v\n%s", err, out)
	}
	if n := hook.attempts() - before; n != 1 {
		t.Fatalf("the sync tried the refused alert %d times; want once (then its backoff)", n)
	}
	hook.set("")
	if err, out := syncOnce(t, "-c", good); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hook.want(t, "after the receiver came back", map[string]int{"run_failed": 2, "run_recovered": 2})

	// Receiver hanging (its timeout is 5m): --alert-wait bounds the
	// sync, and the next invocation delivers the alert once.
	hook.set("hang")
	if err, out := syncOnce(t, "-c", bad, "--alert-wait", "300ms"); err == nil || !strings.Contains(out, "1 alert(s) not delivered") {
		t.Fatalf("sync with the receiver hanging: %v\n%s", err, out)
	}
	hook.set("")
	if err, out := syncOnce(t, "-c", good); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hook.want(t, "after the hanging receiver", map[string]int{"run_failed": 3, "run_recovered": 3})
}

// A volume rule with action pause holds a CLI run of a truncated table
// before it writes and pauses the import; the next sync refuses until
// --resume accepts the new volume.
func TestSyncVolumePause(t *testing.T) {
	hook := newHookReceiver(t)
	dir := alertsDemo(t, "      rules: {volume: {min_runs: 2, action: pause}}\n")
	users := filepath.Join("configs", "imports", "demo-users.yaml")
	for i := 0; i < 2; i++ {
		if err, out := syncOnce(t, "-c", users); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
	}
	wh, err := sql.Open("duckdb", filepath.Join(dir, "data", "demo-warehouse.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wh.Exec(`DELETE FROM main.users WHERE user_id > (SELECT min(user_id) FROM main.users)`); err != nil {
		t.Fatal(err)
	}
	wh.Close()
	err, out := syncOnce(t, "-c", users)
	if err == nil || !strings.Contains(err.Error(), "volume anomaly") || !strings.Contains(out, "CANCELLED") {
		t.Fatalf("sync of the truncated table: %v\n%s", err, out)
	}
	hook.want(t, "after the anomaly", map[string]int{"volume_anomaly": 1})
	err, out = syncOnce(t, "-c", users)
	if err == nil || !strings.Contains(err.Error(), "is paused: paused by the volume rule") || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("sync of the paused import: %v\n%s", err, out)
	}
	if err, out := syncOnce(t, "-c", users, "--resume"); err != nil || !strings.Contains(out, "resumed") || !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("sync --resume: %v\n%s", err, out)
	}
	hook.want(t, "after the resume", map[string]int{"volume_anomaly": 1})
}
