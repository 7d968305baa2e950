package alerts_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/scheduler"
	"github.com/tributary-dev/tributary/scheduler/alerts"
)

// receiver is a real HTTP alert receiver on loopback. While down it
// answers 503; it keeps every body it accepted by idempotency key.
type receiver struct {
	srv   *httptest.Server
	down  atomic.Bool
	mu    sync.Mutex
	got   map[string][]byte // by Idempotency-Key: the bodies accepted
	dups  int               // deliveries of a key already accepted
	tried atomic.Int64
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string][]byte{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.tried.Add(1)
		body, _ := io.ReadAll(req.Body)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		key := req.Header.Get("Idempotency-Key")
		r.mu.Lock()
		if _, ok := r.got[key]; ok {
			r.dups++
		}
		r.got[key] = body
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// kinds returns the kinds of the alerts accepted, sorted, and checks
// that none was accepted twice.
func (r *receiver) kinds(t *testing.T) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dups != 0 {
		t.Errorf("%d alerts delivered twice", r.dups)
	}
	var out []string
	for _, b := range r.got {
		var p struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("alert body %s: %v", b, err)
		}
		out = append(out, p.Kind+p.Text[:min(len(p.Text), 0)])
	}
	slices.Sort(out)
	return out
}

func (r *receiver) body(kind string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, b := range r.got {
		if strings.HasSuffix(k, "."+kind) || strings.Contains(string(b), `"kind":"`+kind+`"`) {
			return b
		}
	}
	return nil
}

type fixture struct {
	t      *testing.T
	dir    string
	wh     string
	st     *duckstore.Store
	sched  *scheduler.Scheduler
	del    *alerts.Deliverer
	mon    *alerts.Monitor
	hook   *receiver
	slack  *receiver
	cmdDir string
	now    atomic.Int64
}

// newFixture: a DuckDB warehouse table ev of rows events (full_sync),
// the real embedded store, a real scheduler whose runs a real Monitor
// watches, and a project whose alerts go to two loopback receivers
// (webhook, Slack) and a command hook.
func newFixture(t *testing.T, rows int, rules string) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{t: t, dir: t.TempDir(), hook: newReceiver(t), slack: newReceiver(t)}
	f.wh = filepath.Join(f.dir, "wh.duckdb")
	f.cmdDir = filepath.Join(f.dir, "cmd")
	if err := os.Mkdir(f.cmdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.exec(`CREATE TABLE ev (id BIGINT PRIMARY KEY, user_id VARCHAR, event_time TIMESTAMP NOT NULL)`)
	f.fill(0, rows)
	cfgText := fmt.Sprintf(`
projects:
  - id: 1
    name: Shop
    token: tok12345678
    api_secret: sec12345678
    alerts:
      base_url: https://tributary.example.com
      destinations:
        - {name: hook, kind: webhook, url: "${HOOK_URL}", headers: {Authorization: "Bearer ${HOOK_TOKEN}"}}
        - {name: chat, kind: slack, url: "${SLACK_URL}"}
        - {name: script, kind: command, command: [sh, -c, 'cat > %s/$TRIBUTARY_ALERT_ID.json']}
      retry: {base: 20ms, max: 100ms, attempts: 100}
      rules:
%s
`, f.cmdDir, rules)
	env := map[string]string{"HOOK_URL": f.hook.srv.URL + "/alerts", "HOOK_TOKEN": "s3cret-token", "SLACK_URL": f.slack.srv.URL + "/services/T0/B0/x"}
	cfg, err := config.Parse("test.yaml", []byte(cfgText), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	f.st, err = duckstore.Open(ctx, filepath.Join(f.dir, "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.st.Close() })
	spec := fmt.Sprintf(`id: ev
project_id: 1
import_type: event_stream
sync_mode: full_sync
source: {kind: duckdb, path: %q}
table_params: {table: ev}
event_name: e
time_column_name: event_time
user_column_name: user_id
insert_id_column_name: id
schedule: api
`, f.wh)
	reg := kinds.Registry()
	im, err := importspec.Parse("ev.yaml", []byte(spec), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	projects := func(id int64) (importspec.Project, bool) {
		return importspec.Project{ID: id, Mode: config.IDSimplified}, id == 1
	}
	cat, err := scheduler.NewCatalog(ctx, scheduler.CatalogOptions{Store: f.st, Registry: reg, Projects: projects, Files: []*importspec.Import{im}})
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Now().Add(time.Duration(f.now.Load()) * time.Millisecond) } // f.now: the offset
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f.del = alerts.NewDeliverer(alerts.DelivererOptions{Outbox: f.st, Projects: cfg.Projects, Owner: "test", Poll: 10 * time.Millisecond, Log: log, Now: clock})
	f.mon = alerts.NewMonitor(alerts.MonitorOptions{Store: f.st, Pauser: cat, Projects: cfg.Projects, Now: clock, Wake: f.del.Wake})
	f.sched = scheduler.New(cat, scheduler.Options{Store: f.st, Monitor: f.mon,
		Runner: &run.Runner{Registry: reg, Store: f.st, Backoff: run.Backoff{Attempts: 1}}})
	t.Cleanup(func() { _ = f.sched.Stop(context.Background()) })
	return f
}

// testWriter sends a logger's lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (f *fixture) exec(q string, args ...any) {
	f.t.Helper()
	db, err := sql.Open("duckdb", f.wh)
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) fill(from, n int) {
	f.exec(`INSERT INTO ev (id, user_id, event_time) SELECT i, 'u' || i, TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL 1 SECOND FROM range(?, ?) t(i)`, from, from+n)
}

func (f *fixture) sync() store.Run {
	f.t.Helper()
	e, ok := f.sched.Catalog().Get(1, "ev")
	if !ok {
		f.t.Fatal("no import ev")
	}
	r, err := f.sched.RunForeground(context.Background(), e, scheduler.TriggerCLI, false, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// deliver runs the deliverer until the outbox holds nothing pending.
func (f *fixture) deliver() {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.del.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := f.st.AlertCounts(context.Background())
		if err != nil {
			f.t.Fatal(err)
		}
		if c[1][store.AlertPending] == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatal("alerts still pending after 20s")
}

func (f *fixture) commandKinds() []string {
	f.t.Helper()
	ents, err := os.ReadDir(f.cmdDir)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(f.cmdDir, e.Name()))
		if err != nil {
			f.t.Fatal(err)
		}
		var p alerts.Payload
		if err := json.Unmarshal(b, &p); err != nil {
			f.t.Fatalf("command stdin %s: %v", b, err)
		}
		out = append(out, p.Kind)
	}
	slices.Sort(out)
	return out
}

// A failing import raises exactly one alert however often it fails, and
// the next success exactly one recovery, at every destination.
func TestFailureAndRecovery(t *testing.T) {
	f := newFixture(t, 100, "        failed: true")
	if r := f.sync(); r.Status != store.RunSucceeded {
		t.Fatalf("first run: %s %s", r.Status, r.Reason)
	}
	f.exec(`ALTER TABLE ev RENAME TO ev_gone`)
	for i := 0; i < 2; i++ {
		if r := f.sync(); r.Status != store.RunFailed {
			t.Fatalf("run on a missing table: %s", r.Status)
		}
	}
	f.exec(`ALTER TABLE ev_gone RENAME TO ev`)
	if r := f.sync(); r.Status != store.RunSucceeded {
		t.Fatalf("run after the fix: %s %s", r.Status, r.Reason)
	}
	f.sync() // a second success: no second recovery
	f.deliver()
	want := []string{alerts.KindRunFailed, alerts.KindRunRecovered}
	if got := f.hook.kinds(t); !slices.Equal(got, want) {
		t.Errorf("webhook got %v, want %v", got, want)
	}
	if got := f.slack.kinds(t); len(got) != 2 {
		t.Errorf("slack got %d messages, want 2", len(got))
	}
	if got := f.commandKinds(); !slices.Equal(got, want) {
		t.Errorf("command hook got %v, want %v", got, want)
	}
	if ents, _ := os.ReadDir(f.cmdDir); len(ents) > 0 {
		b, _ := os.ReadFile(filepath.Join(f.cmdDir, ents[0].Name()))
		t.Logf("command hook stdin (%s): %s", ents[0].Name(), b)
	}
	var p alerts.Payload
	if err := json.Unmarshal(f.hook.body(alerts.KindRunFailed), &p); err != nil {
		t.Fatal(err)
	}
	if p.Project != 1 || p.Import != "ev" || p.Status != store.RunFailed || p.Reason == "" || p.RunID == "" ||
		p.Links.Console != "https://tributary.example.com/#imports/ev/runs/"+p.RunID ||
		p.Links.History != "https://tributary.example.com/api/app/projects/1/warehouse-sources/imports/ev/history" {
		t.Errorf("failure payload: %+v", p)
	}
	for _, k := range []string{alerts.KindRunFailed, alerts.KindRunRecovered} {
		t.Logf("webhook %s: %s", k, f.hook.body(k))
	}
	f.slack.mu.Lock()
	for _, b := range f.slack.got {
		if !strings.Contains(string(b), `"blocks"`) || !strings.Contains(string(b), `"text"`) {
			t.Errorf("slack body without text and blocks: %s", b)
		}
		t.Logf("slack: %s", b)
	}
	f.slack.mu.Unlock()
}

// A receiver down for a while gets every alert once it is back.
func TestReceiverDown(t *testing.T) {
	f := newFixture(t, 100, "        failed: true")
	f.hook.down.Store(true)
	f.slack.down.Store(true)
	f.sync()
	f.exec(`ALTER TABLE ev RENAME TO ev_gone`)
	f.sync()
	f.exec(`ALTER TABLE ev_gone RENAME TO ev`)
	f.sync()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.del.Run(ctx); close(done) }()
	for f.hook.tried.Load() < 6 || f.slack.tried.Load() < 6 { // several failed attempts each
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	f.hook.down.Store(false)
	f.slack.down.Store(false)
	f.deliver()
	want := []string{alerts.KindRunFailed, alerts.KindRunRecovered}
	if got := f.hook.kinds(t); !slices.Equal(got, want) {
		t.Errorf("webhook got %v, want %v", got, want)
	}
	if got := f.slack.kinds(t); len(got) != 2 {
		t.Errorf("slack got %d, want 2", len(got))
	}
}

func countEvents(t *testing.T, st store.Store) int {
	n := 0
	err := st.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 62}, func(*store.Event) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A source table truncated between runs, with action: pause: the run
// stops before it reads or writes anything, the import is paused with
// the reason, one alert names the anomaly; PATCH paused:false resumes
// and the next run goes through without a second alert.
func TestTruncatedTablePauses(t *testing.T) {
	f := newFixture(t, 100, "        volume: {min_runs: 3, action: pause}")
	for i := 0; i < 3; i++ {
		if r := f.sync(); r.Status != store.RunSucceeded || r.RowsRead != 100 {
			t.Fatalf("run %d: %s, %d rows", i, r.Status, r.RowsRead)
		}
	}
	before := countEvents(t, f.st)
	f.exec(`DELETE FROM ev`)
	r := f.sync()
	if r.Status != store.RunCancelled || r.RowsRead != 0 || r.Imported != 0 || !strings.Contains(r.Reason, "volume anomaly") {
		t.Fatalf("run on the truncated table: %s %q, %d read, %d imported", r.Status, r.Reason, r.RowsRead, r.Imported)
	}
	if n := countEvents(t, f.st); n != before {
		t.Errorf("events %d, want %d", n, before)
	}
	e, _ := f.sched.Catalog().Get(1, "ev")
	if !e.Paused() || !strings.Contains(e.PausedReason, "volume rule") {
		t.Fatalf("import after the anomaly: paused=%v reason %q", e.Paused(), e.PausedReason)
	}
	if _, _, err := f.sched.Trigger(context.Background(), 1, "ev", scheduler.TriggerAPI, false); err == nil {
		t.Error("a paused import ran")
	}
	f.deliver()
	if got := f.hook.kinds(t); !slices.Equal(got, []string{alerts.KindVolume}) {
		t.Fatalf("webhook got %v", got)
	}
	body := f.hook.body(alerts.KindVolume)
	if !strings.Contains(string(body), `"action":"pause"`) || !strings.Contains(string(body), "0 rows") {
		t.Errorf("anomaly alert: %s", body)
	}
	t.Logf("webhook %s: %s", alerts.KindVolume, body)
	// A process whose catalog missed the pause (several processes on one
	// store) still holds its run: the stored document says paused.
	w := f.mon.Watch(context.Background(), e.Import, store.Run{ID: "elsewhere", Project: 1, Import: "ev"})
	if err := w.Preflight(context.Background(), run.Plan{Import: e.Import, SourceRows: func(context.Context) int64 { return 0 }}); err == nil {
		t.Error("a run of a process that missed the pause went ahead")
	}
	resume := false
	e, err := f.sched.Catalog().Patch(context.Background(), 1, "ev", &resume, nil)
	if err != nil || e.Paused() || e.PausedReason != "" {
		t.Fatalf("resume: %v paused=%v reason %q", err, e.Paused(), e.PausedReason)
	}
	if r := f.sync(); r.Status != store.RunSucceeded {
		t.Fatalf("run after resuming: %s %s", r.Status, r.Reason)
	}
	f.deliver()
	if got := f.hook.kinds(t); len(got) != 1 {
		t.Errorf("alerts after resuming: %v", got)
	}
}

// Schema changes are named; refused rows over the limit alert once;
// freshness goes stale on the scheduler's clock and back.
func TestSchemaRefusedFreshness(t *testing.T) {
	f := newFixture(t, 100, `        refused: {max_rows: 5}
        freshness: {max_age: 1h}`)
	f.sync()
	f.exec(`ALTER TABLE ev ADD COLUMN plan VARCHAR`)
	f.exec(`ALTER TABLE ev DROP COLUMN user_id`)
	f.exec(`ALTER TABLE ev ADD COLUMN user_id VARCHAR`)
	f.exec(`UPDATE ev SET user_id = CASE WHEN id < 10 THEN NULL ELSE 'u' || id END`)
	r := f.sync()
	if r.Failed < 6 {
		t.Fatalf("refused %d rows, want 10 (%s %s)", r.Failed, r.Status, r.Reason)
	}
	f.sync() // refused again: no second alert
	f.deliver()
	if got := f.hook.kinds(t); !slices.Equal(got, []string{alerts.KindRowsRefused, alerts.KindSchemaChanged}) {
		t.Errorf("webhook got %v", got)
	}
	if b := string(f.hook.body(alerts.KindSchemaChanged)); !strings.Contains(b, "added: plan") {
		t.Errorf("schema alert does not name the added column: %s", b)
	}
	// Two hours later on the scheduler's clock, nothing new arrived.
	f.now.Add((2 * time.Hour).Milliseconds())
	e, _ := f.sched.Catalog().Get(1, "ev")
	for i := 0; i < 2; i++ {
		if err := f.mon.CheckFreshness(context.Background(), []*importspec.Import{e.Import}); err != nil {
			t.Fatal(err)
		}
	}
	f.fill(1000, 10)
	f.sync()
	f.deliver()
	want := []string{alerts.KindStale, alerts.KindResolved, alerts.KindRowsRefused, alerts.KindSchemaChanged}
	slices.Sort(want)
	if got := f.hook.kinds(t); !slices.Equal(got, want) {
		t.Errorf("webhook got %v, want %v", got, want)
	}
	for _, k := range want {
		t.Logf("webhook %s: %s", k, f.hook.body(k))
	}
}
