package integration

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Imports that try to reach beyond their source (issue 29): the server's
// files and its store, other DuckDB files, files written by COPY, SQL
// with write effects on a Postgres warehouse (on the Postgres store's own
// database too). Each runs as a YAML import on a real server and, for
// most, through `tributary preview`: every run fails with a refusal,
// nothing is read into the project, no file or table changes, and the
// server starts again afterwards.

func TestHostileSourcesEmbeddedStore(t *testing.T) { hostileSources(t, false) }

func TestHostileSourcesPostgresStore(t *testing.T) { hostileSources(t, true) }

// hostileProbe is one import: its source and query, the text its run's
// failure must hold, and whether preview runs it too.
type hostileProbe struct {
	id, source, table, want string
	preview                 bool
}

func hostileSources(t *testing.T, pgStore bool) {
	root := t.TempDir()
	dataDir, importsDir := filepath.Join(root, "data"), filepath.Join(root, "imports")
	if err := os.MkdirAll(importsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	wh, other := filepath.Join(root, "wh.duckdb"), filepath.Join(root, "other.duckdb")
	for _, p := range []string{wh, other} {
		if out, err := exec.Command(binPath, "demo-warehouse", p).CombinedOutput(); err != nil {
			t.Fatalf("demo-warehouse: %v\n%s", err, out)
		}
	}
	// The Postgres warehouse the postgres probes aim at: the store's own
	// database with a Postgres store, else one with the same sequence.
	victim := newPGDB(t)
	cfg := defaultConfig()
	cfg.ImportsDir = importsDir
	if pgStore {
		cfg.Store = storeURL(t, victim)
	} else {
		victim.exec(t, "CREATE SEQUENCE event_seq")
		victim.exec(t, "CREATE TABLE events AS SELECT 1 AS project")
	}
	t.Setenv("TRIBUTARY_IT_HOSTILE_DSN", victim.dsn) // the children inherit it

	duck := fmt.Sprintf("{kind: duckdb, path: %q}", wh)
	pg := `{kind: postgres, dsn: "${TRIBUTARY_IT_HOSTILE_DSN}"}`
	query := func(q string) string { return fmt.Sprintf("{query: %q}", q) }
	storeFile := filepath.Join(dataDir, "tributary.duckdb")
	probes := []hostileProbe{
		{"h-passwd", duck, query("SELECT content AS u FROM read_text('/etc/passwd')"), "refused", true},
		{"h-write-log", duck, query("SELECT filename AS u FROM read_blob('" + storeFile + ".log/*')"), "refused", true},
		{"h-store-path", fmt.Sprintf("{kind: duckdb, path: %q}", storeFile), "{table: main.events}", "source.path", true},
		{"h-store-file", duck, fmt.Sprintf("{table: %q}", storeFile+".log/*"), "table_params.table", false},
		{"h-copy-into-imports", duck, query("COPY (SELECT 'x' AS u) TO '" + filepath.Join(importsDir, "evil.yaml") + "'"), "table_params.query", true},
		{"h-copy-after-select", duck, query("SELECT 'x' AS u; COPY (SELECT 'x' AS u) TO '" + filepath.Join(root, "copied.csv") + "'"), "table_params.query", false},
		{"h-attach-drop", duck, query("ATTACH '" + other + "' AS o; DROP TABLE o.users"), "table_params.query", true},
		{"h-attach-store", duck, query("ATTACH '" + storeFile + "' AS s; DELETE FROM s.events WHERE project = 1"), "table_params.query", false},
		{"h-install", duck, query("INSTALL httpfs"), "table_params.query", false},
		{"h-in-memory", "{kind: duckdb}", fmt.Sprintf("{table: %q}", filepath.Join(root, "*.csv")), "allowed_paths", false},
		{"h-setval", pg, query("SELECT setval('event_seq', 1)::text AS u"), "read-only transaction", true},
		{"h-nextval", pg, query("SELECT nextval('event_seq')::text AS u"), "read-only transaction", false},
		{"h-delete", pg, query("SELECT '1' AS u) AS q; DELETE FROM events; SELECT * FROM (SELECT '1' AS u"), "refused", true},
	}
	for _, p := range probes {
		spec := fmt.Sprintf("id: %s\nproject_id: %d\nimport_type: people\nsync_mode: full_sync\nsource: %s\ntable_params: %s\nuser_column_name: u\nschedule: api\n",
			p.id, mainID, p.source, p.table)
		if err := os.WriteFile(filepath.Join(importsDir, p.id+".yaml"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A legitimate import of the same warehouse, which must still work.
	legit := fmt.Sprintf("id: ok-users\nproject_id: %d\nimport_type: people\nsync_mode: full_sync\nsource: %s\ntable_params: {query: \"SELECT user_id, email FROM main.users\"}\nuser_column_name: user_id\nschedule: api\n", mainID, duck)
	if err := os.WriteFile(filepath.Join(importsDir, "ok-users.yaml"), []byte(legit), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerIn(t, root, cfg)
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), events("before", 3)), 3)

	digest := func() string { return filesDigest(t, wh, other, importsDir) }
	before := digest()
	seq := func() int64 {
		var n int64
		if err := victim.conn.QueryRow(context.Background(), "SELECT last_value FROM event_seq").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	seq0 := seq()

	for _, p := range probes {
		run := waitRun(t, s, p.id, manualSync(t, s, p.id))
		t.Logf("%s: %s %s", p.id, run.Status, run.Reason)
		if run.Status != "FAILED" || !strings.Contains(run.Reason, p.want) || run.Imported != 0 {
			t.Errorf("%s: run %s (%q, %d imported); want FAILED naming %q", p.id, run.Status, run.Reason, run.Imported, p.want)
		}
		if strings.Contains(run.Reason, "root:") || strings.Contains(run.Reason, "000001") {
			t.Errorf("%s: the failure shows what was read: %s", p.id, run.Reason)
		}
	}

	if run := waitRun(t, s, "ok-users", manualSync(t, s, "ok-users")); run.Status != "SUCCEEDED" || run.Imported != 500 {
		t.Errorf("the legitimate import: %s, %d imported (%s); want SUCCEEDED, 500", run.Status, run.Imported, run.Reason)
	}

	// preview through the binary, from the server's directory so its
	// default data_dir (./data) is the server's.
	for _, p := range probes {
		if !p.preview {
			continue
		}
		cmd := exec.Command(binPath, "preview", "--config", filepath.Base(s.cfgPath), "-c", filepath.Join(importsDir, p.id+".yaml"))
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), p.want) || strings.Contains(string(out), "root:") {
			t.Errorf("preview %s: %v\n%s\nwant a failure naming %q", p.id, err, out, p.want)
		}
	}

	if after := digest(); after != before {
		t.Error("the warehouse, the other DuckDB file or imports_dir changed")
	}
	for _, f := range []string{filepath.Join(importsDir, "evil.yaml"), filepath.Join(root, "copied.csv")} {
		if _, err := os.Stat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was written", f)
		}
	}
	if n := seq(); n != seq0 {
		t.Errorf("event_seq moved from %d to %d", seq0, n)
	}
	var n int
	if err := victim.conn.QueryRow(context.Background(), "SELECT count(*) FROM events").Scan(&n); err != nil || n == 0 {
		t.Errorf("events of the Postgres warehouse: %d (%v)", n, err)
	}
	// The project's events are all still there, nothing was added, and
	// the server starts again.
	s.Restart()
	if lines, _ := exportIDs(t, s); lines != 3 {
		t.Errorf("export after the probes: %d events, want the 3 imported before", lines)
	}
	if r := s.do(t, request{Method: http.MethodGet, Path: "/healthz"}); r.Status != http.StatusOK {
		t.Errorf("healthz after restart: %s", r)
	}
}

// startServerIn is startServer with the data directory and config file
// in dir, so a test can name the store's files before the server starts.
func startServerIn(t *testing.T, dir string, cfg serverConfig) *server {
	t.Helper()
	s := &server{t: t, Cfg: cfg, dataDir: filepath.Join(dir, "data"), cfgPath: filepath.Join(dir, "tributary.yaml"),
		logs: &tailBuffer{max: 64 << 10}}
	s.Start()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("server did not shut down cleanly on SIGTERM: %v", err)
		}
		if t.Failed() {
			s.logFailure(t)
		}
	})
	return s
}

// filesDigest hashes the files (and every file under the directories)
// given: names, sizes and contents.
func filesDigest(t *testing.T, paths ...string) string {
	t.Helper()
	h := sha256.New()
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %d %x\n", p, len(b), sha256.Sum256(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
