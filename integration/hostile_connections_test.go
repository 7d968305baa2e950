package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Hostile imports (issue 29, first bullet): a project owner of project 2
// on a two-project server tries to make the warehouse-import path read
// the server's environment, another project's connection or the server's
// files. Every attempt is refused naming the field, no response shows a
// value of the server's environment, nothing runs, and the server starts
// again afterwards. Both stores.

const (
	hostileOwner  = "p2-owner"
	hostileSecret = "p2-owner-secret-1"
	p1Conn        = "10" // project 1's connection
	p2Conn        = "20" // project 2's connection
)

func randHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// hostileServer starts the two-project server; its environment holds
// project 1's API secret, the metrics token, project 1's DSN (with a
// password), project 2's DSN and, for the Postgres store, the store URL.
// It returns the server and every secret value of that environment.
func hostileServer(t *testing.T, pgStore bool) (*server, []string) {
	s, secrets, _, _ := hostileServerWith(t, pgStore, nil)
	return s, secrets
}

// hostileServerWith is hostileServer with the config changed by edit
// before the start; it also returns the warehouse and, for the Postgres
// store, the store's database.
func hostileServerWith(t *testing.T, pgStore bool, edit func(*serverConfig, map[string]string, *pgDB)) (*server, []string, *pgDB, *pgDB) {
	t.Helper()
	wh := newPGDB(t)
	wh.eventTable(t, 50)
	env := map[string]string{
		"TRIB_IT_P1_SECRET":     "p1-api-secret-" + randHex(t),
		"TRIB_IT_METRICS_TOKEN": "metrics-token-" + randHex(t),
		"TRIB_IT_P1_DSN":        "postgres://p1reader:p1-dsn-pass-" + randHex(t) + "@127.0.0.1:1/p1?sslmode=disable",
		"TRIB_IT_P2_DSN":        wh.dsn,
	}
	cfg := serverConfig{
		Region: "us", LogLevel: "info", MemoryLimit: "512MB", ImportsDir: t.TempDir(),
		MetricsTok: "${TRIB_IT_METRICS_TOKEN}",
		Projects: []projectConfig{
			{ID: 1, Name: "One", Token: "p1-token-00000001", APISecret: "${TRIB_IT_P1_SECRET}", Region: "us", IDManagement: "simplified",
				ServiceAccounts: []saConfig{{"p1-owner", "p1-owner-secret-1", "owner"}}},
			{ID: 2, Name: "Two", Token: "p2-token-00000002", APISecret: "p2-secret-00000002", Region: "us", IDManagement: "simplified",
				ServiceAccounts: []saConfig{{hostileOwner, hostileSecret, "owner"}}},
		},
		Connections: []map[string]any{
			{"id": p1Conn, "kind": "postgres", "dsn": "${TRIB_IT_P1_DSN}", "projects": []int{1}},
			{"id": p2Conn, "kind": "postgres", "dsn": "${TRIB_IT_P2_DSN}", "projects": []int{2}},
		},
	}
	var stDB *pgDB
	if pgStore {
		stDB = newPGDB(t)
		env["TRIB_IT_STORE_URL"] = storeURL(t, stDB)
		cfg.Store = "${TRIB_IT_STORE_URL}"
	}
	if edit != nil {
		edit(&cfg, env, wh)
	}
	secrets := make([]string, 0, len(env))
	for k, v := range env {
		t.Setenv(k, v) // the child inherits them
		secrets = append(secrets, v)
	}
	return startServer(t, cfg), secrets, wh, stDB
}

// wantNoSecret fails if body shows any secret value.
func wantNoSecret(t *testing.T, what string, body []byte, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if bytes.Contains(body, []byte(s)) {
			t.Fatalf("%s shows a secret of the server's environment: %s", what, body)
		}
	}
}

func TestHostileImportsAreRefused(t *testing.T) {
	for _, pgStore := range []bool{false, true} {
		name := "embedded"
		if pgStore {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { hostileImports(t, pgStore) })
	}
}

func hostileImports(t *testing.T, pgStore bool) {
	s, secrets := hostileServer(t, pgStore)
	as := basicAuth(hostileOwner, hostileSecret)
	base := "/api/app/projects/2/warehouse-sources/imports"
	// body is an event-stream import of project 2's table ev with fields
	// added or replaced.
	body := func(fields map[string]any) []byte {
		m := map[string]any{"warehouse_source_id": p2Conn, "table_params": map[string]any{"table": "ev"},
			"time_column_name": "event_time", "user_column_name": "user_id", "insert_id_column_name": "id",
			"sync_mode": "full_sync", "run_every": 0}
		for k, v := range fields {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return mustJSON(t, m)
	}
	dataFile := filepath.Join(s.dataDir, "tributary.duckdb")
	attacks := []struct {
		name   string
		fields map[string]any
		field  string // the refusal names it
	}{
		{"inline DSN from the environment", map[string]any{"warehouse_source_id": nil,
			"source": map[string]any{"kind": "postgres", "dsn": "${TRIB_IT_P1_DSN}"}}, "source"},
		{"inline store URL", map[string]any{"warehouse_source_id": nil,
			"source": map[string]any{"kind": "postgres", "dsn": "${TRIB_IT_STORE_URL}"}}, "source"},
		{"inline path to the live store", map[string]any{"warehouse_source_id": nil,
			"source": map[string]any{"kind": "duckdb", "path": dataFile}, "table_params": map[string]any{"query": "SELECT * FROM events WHERE project = 1"}}, "source"},
		{"in-memory DuckDB reading a file", map[string]any{"warehouse_source_id": nil,
			"source": map[string]any{"kind": "duckdb"}, "table_params": map[string]any{"query": "SELECT content AS event_time FROM read_text('/etc/passwd')"}}, "source"},
		{"source naming a connection", map[string]any{"warehouse_source_id": nil, "source": map[string]any{"connection": p2Conn}}, "source"},
		{"another project's connection", map[string]any{"warehouse_source_id": p1Conn}, "warehouse_source_id"},
		{"no connection", map[string]any{"warehouse_source_id": nil}, "warehouse_source_id"},
		{"environment in the connection id", map[string]any{"warehouse_source_id": "${TRIB_IT_P2_CONN:-20}"}, "warehouse_source_id"},
		{"environment in a query", map[string]any{"table_params": map[string]any{"query": "SELECT '${TRIB_IT_P1_SECRET}' AS secret, * FROM ev"}}, "table_params.query"},
		{"metrics token in a query", map[string]any{"table_params": map[string]any{"query": "SELECT '${TRIB_IT_METRICS_TOKEN}' AS t, * FROM ev"}}, "table_params.query"},
		{"unset default in a query", map[string]any{"table_params": map[string]any{"query": "SELECT '${UNSET:-x}' AS x, * FROM ev"}}, "table_params.query"},
		{"environment as the table", map[string]any{"table_params": map[string]any{"table": "${TRIB_IT_P1_SECRET}"}}, "table_params.table"},
		{"every second", map[string]any{"run_every": nil, "schedule": "@every 1s"}, "schedule"},
		{"every zero seconds", map[string]any{"run_every": nil, "schedule": "@every 0s"}, "schedule"},
		{"every millisecond", map[string]any{"run_every": nil, "schedule": "@every 1ms"}, "schedule"},
		{"every second in a time zone", map[string]any{"run_every": nil, "schedule": "TZ=UTC @every 1s"}, "schedule"},
	}
	for _, a := range attacks {
		r := s.do(t, request{Path: base + "/event-stream", Auth: as, Body: body(a.fields)})
		wantNoSecret(t, a.name, r.Body, secrets)
		var m map[string]any
		_ = json.Unmarshal(r.Body, &m)
		msg, _ := m["error"].(string)
		if r.Status != http.StatusBadRequest || m["status"] != "error" || !strings.Contains(msg, a.field+":") {
			t.Errorf("%s: %s, want 400 naming %s", a.name, r, a.field)
		}
	}

	// Whether a variable is set shows nowhere: the refusals of a set and
	// an unset one are the same but for the name.
	set := s.do(t, request{Path: base + "/event-stream", Auth: as, Body: body(map[string]any{"table_params": map[string]any{"query": "SELECT '${TRIB_IT_P1_SECRET}'"}})})
	unset := s.do(t, request{Path: base + "/event-stream", Auth: as, Body: body(map[string]any{"table_params": map[string]any{"query": "SELECT '${TRIB_IT_NOT_SET_ANYWHERE}'"}})})
	if set.Status != unset.Status || !bytes.Equal(set.Body, unset.Body) {
		t.Errorf("set and unset variables answered differently:\n%s\n%s", set, unset)
	}

	// Anything else is taken literally: the event name is "${…}" itself.
	literal := "${TRIB_IT_P1_SECRET}"
	created := s.do(t, request{Path: base + "/event-stream", Auth: as, Body: body(map[string]any{"event_name": literal})})
	wantNoSecret(t, "creating an import", created.Body, secrets)
	var c struct{ Results map[string]any }
	if created.Status != http.StatusOK || json.Unmarshal(created.Body, &c) != nil || c.Results["event_name"] != literal {
		t.Fatalf("an import with a literal event name: %s", created)
	}
	id := fmt.Sprint(c.Results["id"])
	path := base + "/" + id
	got := s.do(t, request{Method: http.MethodGet, Path: path, Auth: as})
	wantNoSecret(t, "the import's view", got.Body, secrets)
	if got.Status != http.StatusOK || !strings.Contains(string(got.Body), `"warehouse_source_id":`+p2Conn) ||
		strings.Contains(string(got.Body), "dsn") || strings.Contains(string(got.Body), "sslmode") {
		t.Fatalf("the import's view must name the connection and show none of its fields: %s", got)
	}

	// PATCH cannot go under the schedule floor either.
	for _, sc := range []string{"@every 1s", "@every 0s", "@every -1s", "@every 1ms", "@every 59s"} {
		r := s.do(t, request{Method: http.MethodPatch, Path: path, Auth: as, Body: mustJSON(t, map[string]any{"schedule": sc})})
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "schedule:") {
			t.Errorf("PATCH schedule %q: %s, want 400 naming schedule", sc, r)
		}
	}

	// The import runs on its own connection, and what it stores names
	// the event literally.
	sync := s.do(t, request{Method: http.MethodPut, Path: path + "/manual-sync", Auth: as, Body: []byte(`{}`)})
	var sr struct {
		Results struct {
			RunID string `json:"run_id"`
		}
	}
	if sync.Status != http.StatusOK || json.Unmarshal(sync.Body, &sr) != nil {
		t.Fatalf("manual sync: %s", sync)
	}
	run := waitHostileRun(t, s, as, path, sr.Results.RunID)
	if run.Status != "SUCCEEDED" || run.Imported != 50 {
		t.Fatalf("run of the literal import: %+v", run)
	}
	exp := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(2, nil), Auth: as})
	wantNoSecret(t, "project 2's export", exp.Body, secrets)
	evs := parseExport(t, exp.Body)
	if len(evs) != 50 || evs[0].Event != literal {
		t.Fatalf("project 2's export: %d events, first %+v", len(evs), evs)
	}
	if p1 := s.export(t, basicAuth("p1-owner", "p1-owner-secret-1"), 1, nil); len(p1) != 0 {
		t.Fatalf("project 1 got %d events", len(p1))
	}

	// The server starts again with what was accepted, and only that.
	s.Restart()
	list := s.do(t, request{Method: http.MethodGet, Path: base, Auth: as})
	wantNoSecret(t, "the list after a restart", list.Body, secrets)
	var l struct{ Results []map[string]any }
	if err := json.Unmarshal(list.Body, &l); err != nil || len(l.Results) != 1 || fmt.Sprint(l.Results[0]["id"]) != id ||
		l.Results[0]["schedule"] != "api" {
		t.Fatalf("imports after a restart: %s", list)
	}
}

// waitHostileRun is waitRun for project 2's import at path.
func waitHostileRun(t *testing.T, s *server, a authFn, path, runID string) runRow {
	t.Helper()
	for range 3000 {
		r := s.do(t, request{Method: http.MethodGet, Path: path + "/history", Auth: a})
		var h struct{ Results struct{ Runs []runRow } }
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &h) != nil {
			t.Fatalf("history: %s", r)
		}
		if run, ok := findRun(h.Results.Runs, runID); ok && run.Status != "RUNNING" {
			return run
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("run %s not finished", runID)
	return runRow{}
}

// The operator's files: ${VAR:-default} where a secret goes is refused
// by `tributary validate` (import files) and `tributary serve` (the
// server config), naming the key and showing no part of the default.
func TestHostileSecretDefaultsInFiles(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tributary.yaml")
	writeFile := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	project := "projects:\n  - {id: 1, name: A, token: tok-aaaaaaaa, api_secret: %s}\n"
	writeFile(cfgPath, fmt.Sprintf(project, "sec-aaaaaaaa")+"imports_dir: "+dir+"\n")
	imp := filepath.Join(dir, "imp.yaml")
	writeFile(imp, `id: x
project_id: 1
import_type: event_stream
sync_mode: full_sync
source: {kind: postgres, dsn: "${TRIB_IT_UNSET_DSN:-postgres://u:default-pass-1@h/db}"}
table_params: {table: ev}
time_column_name: t
`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // a server that did start is stopped
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, "validate", "--config", cfgPath, "-c", imp).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "source.dsn: is a secret") || strings.Contains(string(out), "default-pass-1") {
		t.Fatalf("validate of an import with a secret default: %v\n%s", err, out)
	}
	for _, tc := range []struct{ name, config, want string }{
		{"api_secret", fmt.Sprintf(project, `"${TRIB_IT_UNSET:-default-pass-2}"`), "projects[0].api_secret: line 2: ${VAR:-default} is not accepted for a secret"},
		{"metrics_token", "metrics_token: ${TRIB_IT_UNSET:-default-pass-2-0123456789}\n" + fmt.Sprintf(project, "sec-aaaaaaaa"), "metrics_token: line 1"},
		{"merge key", "base: &b {api_secret: default-pass-2}\n" + "projects:\n  - <<: *b\n    id: 1\n", "YAML merge keys"},
		{"connection literal secret", fmt.Sprintf(project, "sec-aaaaaaaa") + "connections:\n  - {id: a, kind: postgres, dsn: 'postgres://u:default-pass-2@h/db'}\n", "connections[0].dsn: is a secret"},
	} {
		writeFile(cfgPath, tc.config)
		out, err := exec.CommandContext(ctx, binPath, "serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "default-pass-2") {
			t.Errorf("serve with %s: %v\n%s\nwant %q", tc.name, err, out, tc.want)
		}
	}
}

// Connections created through the app API: owner only, a Postgres server
// on the operator's allow-list only, the password sealed in the store and
// shown in no answer; an import on it syncs, before and after a restart.
func TestHostileConnectionAPI(t *testing.T) {
	for _, pgStore := range []bool{false, true} {
		name := "embedded"
		if pgStore {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { connectionAPI(t, pgStore) })
	}
}

func connectionAPI(t *testing.T, pgStore bool) {
	password := "conn-pass-" + randHex(t)
	var host, port, user, database string
	s, secrets, _, stDB := hostileServerWith(t, pgStore, func(cfg *serverConfig, env map[string]string, wh *pgDB) {
		c, err := pgx.ParseConfig(wh.dsn)
		if err != nil {
			t.Fatal(err)
		}
		host, port, user, database = c.Host, strconv.Itoa(int(c.Port)), c.User, c.Database
		env["TRIB_IT_CONN_KEY"] = randHex(t) + randHex(t) + randHex(t) + randHex(t)
		cfg.ConnectionKey = "${TRIB_IT_CONN_KEY}"
		cfg.ConnectionHosts = []string{net.JoinHostPort(host, port)}
		cfg.Projects[1].ServiceAccounts = append(cfg.Projects[1].ServiceAccounts, saConfig{"p2-admin", "p2-admin-secret-1", "admin"})
	})
	secrets = append(secrets, password)
	owner := basicAuth(hostileOwner, hostileSecret)
	conns := "/api/app/projects/2/warehouse-sources/connections"
	conn := func(fields map[string]any) []byte {
		m := map[string]any{"kind": "postgres", "host": host, "port": port, "user": user, "password": password, "database": database, "sslmode": "disable"}
		for k, v := range fields {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return mustJSON(t, m)
	}
	refusals := []struct {
		name   string
		auth   authFn
		body   []byte
		status int
		field  string
	}{
		{"an admin", basicAuth("p2-admin", "p2-admin-secret-1"), conn(nil), http.StatusForbidden, "connections need owner"},
		{"a local port", owner, conn(map[string]any{"port": "22"}), http.StatusBadRequest, "host:"},
		{"another host", owner, conn(map[string]any{"host": "localhost"}), http.StatusBadRequest, "host:"},
		{"a unix socket", owner, conn(map[string]any{"host": "/var/run/postgresql"}), http.StatusBadRequest, "host:"},
		{"a DSN", owner, mustJSON(t, map[string]any{"kind": "postgres", "dsn": "${TRIB_IT_P1_DSN}"}), http.StatusBadRequest, "dsn:"},
		{"the server's password", owner, conn(map[string]any{"password": nil}), http.StatusBadRequest, "password:"},
		{"a DuckDB file", owner, mustJSON(t, map[string]any{"kind": "duckdb", "path": "/etc/passwd"}), http.StatusBadRequest, "path:"},
	}
	for _, rf := range refusals {
		r := s.do(t, request{Path: conns, Auth: rf.auth, Body: rf.body})
		wantNoSecret(t, rf.name, r.Body, secrets)
		if r.Status != rf.status || !strings.Contains(string(r.Body), rf.field) {
			t.Errorf("creating a connection with %s: %s, want %d naming %s", rf.name, r, rf.status, rf.field)
		}
	}
	created := s.do(t, request{Path: conns, Auth: owner, Body: conn(nil)})
	wantNoSecret(t, "creating a connection", created.Body, secrets)
	var cv struct{ Results map[string]any }
	if created.Status != http.StatusOK || json.Unmarshal(created.Body, &cv) != nil || cv.Results["secrets_set"] == nil {
		t.Fatalf("create: %s", created)
	}
	id := fmt.Sprint(cv.Results["id"])
	list := s.do(t, request{Method: http.MethodGet, Path: conns, Auth: owner})
	wantNoSecret(t, "the connection list", list.Body, secrets)
	if !strings.Contains(string(list.Body), `"id":"`+id+`"`) {
		t.Fatalf("list: %s", list)
	}
	if stDB != nil {
		var n int
		if err := stDB.conn.QueryRow(context.Background(), `SELECT count(*) FROM import_docs WHERE doc::text LIKE '%' || $1 || '%'`, password).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the store holds the password in clear (%d docs, %v)", n, err)
		}
	}
	// Project 1 cannot name it; project 2's import on it syncs.
	imp := func() []byte {
		return mustJSON(t, map[string]any{"warehouse_source_id": id, "table_params": map[string]any{"table": "ev"},
			"time_column_name": "event_time", "user_column_name": "user_id", "insert_id_column_name": "id", "sync_mode": "full_sync"})
	}
	if r := s.do(t, request{Path: "/api/app/projects/1/warehouse-sources/imports/event-stream", Auth: basicAuth("p1-owner", "p1-owner-secret-1"), Body: imp()}); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Body), "warehouse_source_id:") {
		t.Fatalf("project 1 naming project 2's connection: %s", r)
	}
	base := "/api/app/projects/2/warehouse-sources/imports"
	r := s.do(t, request{Path: base + "/event-stream", Auth: owner, Body: imp()})
	var ic struct{ Results map[string]any }
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &ic) != nil {
		t.Fatalf("import on the API connection: %s", r)
	}
	path := base + "/" + fmt.Sprint(ic.Results["id"])
	syncOnce := func() runRow {
		t.Helper()
		r := s.do(t, request{Method: http.MethodPut, Path: path + "/manual-sync", Auth: owner, Body: []byte(`{}`)})
		var sr struct {
			Results struct {
				RunID string `json:"run_id"`
			}
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &sr) != nil {
			t.Fatalf("manual sync: %s", r)
		}
		return waitHostileRun(t, s, owner, path, sr.Results.RunID)
	}
	if run := syncOnce(); run.Status != "SUCCEEDED" || run.Imported != 50 {
		t.Fatalf("run: %+v", run)
	}
	if r := s.do(t, request{Method: http.MethodDelete, Path: conns + "/" + id, Auth: owner}); r.Status != http.StatusConflict {
		t.Fatalf("deleting a connection in use: %s, want 409", r)
	}
	s.Restart()
	if run := syncOnce(); run.Status != "SUCCEEDED" || run.RowsRead != 50 {
		t.Fatalf("run after a restart (the sealed password reopened): %+v", run)
	}
}
