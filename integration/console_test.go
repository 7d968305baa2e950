package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// consoleDir holds the console's browser script and its pinned
// playwright-core (console/package-lock.json; `npm ci` there).
const consoleDir = "console"

// needConsoleTools fails under CI=true (.ci/run installs node, the npm
// package and chromium) and skips loudly elsewhere.
func needConsoleTools(t *testing.T) {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node (Node.js 20+)"
	} else if _, err := os.Stat(filepath.Join(consoleDir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing = "npm package playwright-core (integration/console/node_modules)"
	} else if _, err := os.Stat(chromiumPath); err != nil {
		missing = chromiumPath + " (Debian package chromium)"
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("console browser test: %s is missing (CI=true: .ci/run must install it)", missing)
	}
	t.Skipf("SKIPPED console browser test: %s is missing; run `cd integration/console && npm ci` and install Debian's chromium", missing)
}

// consoleImports writes a working import and one whose rows partly fail
// (a quarter of them have no event name) over a DuckDB demo warehouse.
func consoleImports(t *testing.T, dir, warehouse string) {
	t.Helper()
	src := fmt.Sprintf("{kind: duckdb, path: %q}", warehouse)
	files := map[string]string{
		"console-events": fmt.Sprintf(`id: console-events
project_id: %d
import_type: event_stream
sync_mode: time_based
source: %s
table_params: {table: main.app_events}
event_column_name: event_type
time_column_name: event_time
user_column_name: user_id
device_column_name: device_id
insert_id_column_name: event_id
insert_time_column_name: loaded_at
json_properties_column_name: props
property_mappings: {amount_usd: Amount}
exclude_columns: [internal_note]
schedule: api
`, mainID, src),
		"console-broken": fmt.Sprintf(`id: console-broken
project_id: %d
import_type: event_stream
sync_mode: time_based
source: %s
table_params: {query: "SELECT event_id, CASE WHEN user_id IS NULL THEN NULL ELSE event_type END AS event_type, event_time, user_id, loaded_at FROM main.app_events LIMIT 400"}
event_column_name: event_type
time_column_name: event_time
user_column_name: user_id
insert_id_column_name: event_id
insert_time_column_name: loaded_at
schedule: api
`, mainID, src),
		// Long enough to watch its progress live (about 1.5 M generated rows).
		"console-big": fmt.Sprintf(`id: console-big
project_id: %d
import_type: event_stream
sync_mode: time_based
source: %s
table_params: {query: "SELECT 'big-' || i AS id, 'Big' AS ev, TIMESTAMP '2026-01-01' + INTERVAL (i %% 86400) SECOND AS t, 'u' || (i %% 1000) AS u FROM range(1500000) r(i)"}
event_column_name: ev
time_column_name: t
user_column_name: u
insert_id_column_name: id
insert_time_column_name: t
schedule: api
`, mainID, src),
		"console-users": fmt.Sprintf(`id: console-users
project_id: %d
import_type: people
sync_mode: full_sync
source: %s
table_params: {table: main.users}
user_column_name: user_id
schedule: "@daily"
`, mainID, src),
	}
	for name, spec := range files {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsoleBrowser drives the web console in headless Chromium against
// a real server: sign-in (and a wrong secret), the imports, a manual sync
// watched to its end, a failing run's failures, a preview, pause/resume,
// a schedule change, the manual-sync limit, the overview and migrations
// pages, keyboard use and labels, an analyst's read-only view and forged
// writes, CSRF, sign-out and session expiry. Then it reads the server's
// side of the actions back through the app API.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	needConsoleTools(t)
	root := t.TempDir()
	imports, warehouse := filepath.Join(root, "imports"), filepath.Join(root, "warehouse.duckdb")
	if err := os.MkdirAll(imports, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binPath, "demo-warehouse", warehouse).CombinedOutput(); err != nil {
		t.Fatalf("demo-warehouse: %v\n%s", err, out)
	}
	consoleImports(t, imports, warehouse)
	retryFile := consoleRetryImport(t, imports, root)
	cfg := defaultConfig()
	cfg.ImportsDir = imports
	cfg.Extra = map[string]any{"allowed_paths": []string{filepath.Dir(retryFile)}}
	s := startServer(t, cfg)
	short := defaultConfig()
	short.Extra = map[string]any{"console_session_ttl": "2s"}
	ss := startServer(t, short)

	// The failing import's run, made through the app API beforehand.
	badRun := manualSync(t, s, "console-broken")
	if r := waitRun(t, s, "console-broken", badRun); r.Failed == 0 {
		t.Fatalf("the broken import's run has no failed rows: %+v", r)
	}
	retryRun := retriedRun(t, s, retryFile) // a run that retried a source error once
	sendAPIEvents(t, s)

	shots := os.Getenv("CONSOLE_SCREENSHOTS") // set to keep them (docs/console/)
	if shots == "" {
		shots = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "console.mjs")
	cmd.Dir = consoleDir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromiumPath, "CONSOLE_URL="+s.URL, "SHORT_TTL_URL="+ss.URL,
		"OWNER_USER="+ownerSA, "OWNER_SECRET="+ownerSecret, "ANALYST_USER="+analystSA, "ANALYST_SECRET="+analystSec,
		"GOOD_IMPORT=console-events", "BAD_IMPORT=console-broken", "BIG_IMPORT=console-big", "DELETE_IMPORT=console-users", "BAD_RUN="+badRun, "RETRY_IMPORT="+retryImport, "RETRY_RUN="+retryRun, fmt.Sprint("PROJECT_ID=", mainID),
		"SHOTS="+shots)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node console.mjs: %v\nstderr:\n%s\nstdout:\n%s", err, tail(stderr.String(), 4000), tail(stdout.String(), 4000))
	}
	if testing.Verbose() {
		t.Logf("node console.mjs:\n%s", tail(stderr.String(), 4000))
	}
	res := callResults(t, stdout.Bytes())
	checks := []string{"wrong-secret", "signin-labels", "sign-in", "imports-list", "imports-labels", "keyboard-sync", "sync-finishes",
		"run-detail", "live-progress", "failures", "retries", "preview", "import-labels", "pause-resume", "schedule", "delete-import", "sync-limit-429", "overview", "migrations",
		"sign-out", "no-page-errors", "analyst-read-only", "analyst-forged-writes", "owner-csrf", "session-expires"}
	for _, c := range checks {
		t.Run(c, func(t *testing.T) { wantCallsOK(t, res, c) })
	}

	// The server's side: the browser's syncs ran and imported the table,
	// at most 5 API syncs were started, the import ends resumed on @daily.
	runs := history(t, s, "console-events")
	if len(runs) == 0 || len(runs) > 5 {
		t.Fatalf("console-events has %d runs, want 1 to 5 (the hourly limit)", len(runs))
	}
	var stored int64 // new events plus those the broken import had stored first
	for _, r := range runs {
		if r.Status != "SUCCEEDED" || r.Trigger != "api" {
			t.Errorf("run %s: %s triggered by %s", r.RunID, r.Status, r.Trigger)
		}
		stored += r.Imported + r.Duplicates
	}
	if stored != 20000 {
		t.Errorf("the console's syncs imported or found stored %d events, want the table's 20000", stored)
	}
	im := s.do(t, request{Method: "GET", Path: importPath("console-events"), Auth: asOwner}).JSON(t)
	got := im["results"].(map[string]any)
	if got["paused"] != false || got["schedule"] != "@daily" {
		t.Errorf("after the browser: paused=%v schedule=%v, want false and @daily", got["paused"], got["schedule"])
	}
	for _, name := range []string{"signin", "imports", "import", "run", "run-failures", "run-retries", "overview", "migrations", "import-analyst"} {
		if st, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s.png: %v", name, err)
		}
	}
}
