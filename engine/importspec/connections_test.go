package importspec_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/internal/config"
)

// serverEnv is the server's environment in these tests: what no import
// from the app API may ever see.
var serverEnv = map[string]string{
	"P1_SECRET": "p1-api-secret-value",
	"WH_DSN":    "postgres://reader:wh-password@db.internal/wh",
}

func leaks(s string) bool {
	for _, v := range serverEnv {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// twoProjectConnections: "wh" for project 2, "p1" (and numeric "7") for
// project 1 only.
func twoProjectConnections(t *testing.T) importspec.Loader {
	t.Helper()
	cfg, err := config.Parse("c.yaml", []byte(`
projects:
  - {id: 1, name: One, token: tok-11111111, api_secret: "${P1_SECRET}"}
  - {id: 2, name: Two, token: tok-22222222, api_secret: sec-22222222}
connections:
  - {id: wh, kind: postgres, dsn: "${WH_DSN}", projects: [2]}
  - {id: p1, kind: duckdb, path: /srv/p1.duckdb, projects: [1]}
  - {id: "7", kind: duckdb, path: /srv/seven.duckdb, projects: [1, 2]}
`), func(k string) (string, bool) { v, ok := serverEnv[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	conns, err := importspec.NewConnections(cfg.Connections, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	return importspec.Loader{Registry: kinds.Registry(), Connections: conns,
		Env: func(k string) (string, bool) { v, ok := serverEnv[k]; return v, ok }}
}

const apiBase = `"sync_mode":"full_sync","time_column_name":"t","table_params":{"table":"ev"}`

// Imports from the app API name a connection of their project and carry
// nothing the server expands or reads on their behalf.
func TestParseAPI(t *testing.T) {
	l := twoProjectConnections(t)
	cases := []struct {
		name, body string
		wantKey    string // "" = accepted
		wantMsg    string
	}{
		{"connection of the project", `{"project_id":2,"warehouse_source_id":"wh",` + apiBase + `}`, "", ""},
		{"numeric id", `{"project_id":2,"warehouse_source_id":7,` + apiBase + `}`, "", ""},
		{"env in event_name stays literal", `{"project_id":2,"warehouse_source_id":"wh","event_name":"${P1_SECRET}",` + apiBase + `}`, "", ""},
		{"default in event_name stays literal", `{"project_id":2,"warehouse_source_id":"wh","event_name":"${UNSET:-x}",` + apiBase + `}`, "", ""},
		{"another project's connection", `{"project_id":2,"warehouse_source_id":"p1",` + apiBase + `}`, "warehouse_source_id", `no such connection "p1" for project 2`},
		{"unknown connection", `{"project_id":2,"warehouse_source_id":"nope",` + apiBase + `}`, "warehouse_source_id", `no such connection "nope" for project 2`},
		{"no connection", `{"project_id":2,` + apiBase + `}`, "warehouse_source_id", "is required"},
		{"inline dsn", `{"project_id":2,"source":{"kind":"postgres","dsn":"${WH_DSN}"},` + apiBase + `}`, "source", "cannot declare a source"},
		{"inline path", `{"project_id":2,"source":{"kind":"duckdb","path":"/srv/p1.duckdb"},` + apiBase + `}`, "source", "cannot declare a source"},
		{"in-memory duckdb", `{"project_id":2,"source":{"kind":"duckdb"},` + apiBase + `}`, "source", "cannot declare a source"},
		{"source naming a connection", `{"project_id":2,"source":{"connection":"wh"},` + apiBase + `}`, "source", "cannot declare a source"},
		{"env in the connection id", `{"project_id":2,"warehouse_source_id":"${WH}",` + apiBase + `}`, "warehouse_source_id", "${…} is not expanded"},
		{"env in a query", `{"project_id":2,"warehouse_source_id":"wh","sync_mode":"full_sync","time_column_name":"t","table_params":{"query":"SELECT '${P1_SECRET}' AS s"}}`, "table_params.query", "${…} is not expanded"},
		{"unset default in a query", `{"project_id":2,"warehouse_source_id":"wh","sync_mode":"full_sync","time_column_name":"t","table_params":{"query":"SELECT '${UNSET:-x}'"}}`, "table_params.query", "${…} is not expanded"},
		{"env in a table", `{"project_id":2,"warehouse_source_id":"wh","sync_mode":"full_sync","time_column_name":"t","table_params":{"table":"${P1_SECRET}"}}`, "table_params.table", "${…} is not expanded"},
		{"duplicate key", `{"project_id":2,"warehouse_source_id":"wh","warehouse_source_id":"p1",` + apiBase + `}`, "", "already defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			im, err := l.ParseAPI("import 5", []byte(tc.body))
			if err != nil && leaks(err.Error()) {
				t.Fatalf("the error shows a value of the server's environment: %v", err)
			}
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("want accepted, got %v", err)
				}
				if strings.Contains(im.EventName, "p1-api-secret") {
					t.Fatalf("event_name expanded: %q", im.EventName)
				}
				if im.SourceConfig().Kind == "" || im.SourceKind() == "" {
					t.Fatalf("connection not resolved: %+v", im.SourceConfig())
				}
				return
			}
			var ie *importspec.Error
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) || (tc.wantKey != "" && (!errors.As(err, &ie) || ie.Key != tc.wantKey)) {
				t.Fatalf("error %v, want key %q and %q", err, tc.wantKey, tc.wantMsg)
			}
		})
	}
	// The literal stays literal, and the resolved connection is the
	// operator's, never part of the import's encoding.
	im, err := l.ParseAPI("import 5", []byte(`{"project_id":2,"warehouse_source_id":"wh","event_name":"${P1_SECRET}",`+apiBase+`}`))
	if err != nil || im.EventName != "${P1_SECRET}" || im.SourceConfig().Fields["dsn"] != serverEnv["WH_DSN"] {
		t.Fatalf("%v %q %v", err, im.EventName, im.SourceConfig().Kind)
	}
}

// Operator files may name a connection or keep an inline source.
func TestFileConnections(t *testing.T) {
	l := twoProjectConnections(t)
	head := "id: a\nproject_id: 2\nimport_type: event_stream\nsync_mode: full_sync\ntable_params: {table: ev}\ntime_column_name: t\n"
	cases := []struct{ name, yaml, want string }{
		{"source connection", head + "source: {connection: wh}\n", ""},
		{"warehouse_source_id", head + "warehouse_source_id: wh\n", ""},
		{"numeric id", head + "warehouse_source_id: 7\n", ""},
		{"both agreeing", head + "source: {connection: wh}\nwarehouse_source_id: wh\n", ""},
		{"inline source", head + "source: {kind: postgres, dsn: \"${WH_DSN}\"}\n", ""},
		{"both differing", head + "source: {connection: wh}\nwarehouse_source_id: \"7\"\n", `warehouse_source_id: "7" differs from source.connection "wh"`},
		{"connection plus fields", head + "source: {connection: wh, path: /etc}\n", "source.connection: names a connection: give no other source fields"},
		{"another project's", head + "source: {connection: p1}\n", `no such connection "p1" for project 2`},
		{"inline and id", head + "source: {kind: duckdb}\nwarehouse_source_id: wh\n", "give a connection or an inline source, not both"},
		{"secret default", head + "source: {kind: postgres, dsn: \"${UNSET:-postgres://u:pw@h/db}\"}\n", "source.dsn: is a secret"},
		{"secret alias", "pw: &pw hunter2\n" + head + "source: {kind: postgres, host: h, password: *pw}\n", "YAML aliases"},
		{"merge key", "base: &b {kind: postgres, host: h, password: hunter2}\n" + head + "source: {<<: *b}\n", "YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			im, err := l.Parse("f.yaml", []byte(tc.yaml))
			if err == nil {
				err = im.Check(importspec.Rules{Registry: kinds.Registry()})
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			case err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "pw@")):
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

func TestNewConnectionsSecretRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, conn, want string }{
		{"env dsn", `{id: a, kind: postgres, dsn: "${WH_DSN}"}`, ""},
		{"file password", `{id: a, kind: postgres, host: h, password: {file: ` + file + `}}`, ""},
		{"literal dsn", `{id: a, kind: postgres, dsn: "postgres://u:hunter2@h/db"}`, "connections[0].dsn: is a secret"},
		{"default dsn", `{id: a, kind: postgres, dsn: "${NOPE:-postgres://u:hunter2@h/db}"}`, "connections[0].dsn: is a secret"},
		{"file for a plain field", `{id: a, kind: postgres, host: {file: ` + file + `}}`, "connections[0].host: is not a secret field"},
		{"unknown kind", `{id: a, kind: oracle}`, `connections[0].kind: unknown kind "oracle"`},
		{"unknown field", `{id: a, kind: duckdb, colour: red}`, "connections[0].colour: unknown field for kind duckdb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("c.yaml", []byte("projects:\n  - {id: 1, name: A, token: tok-aaaaaaaa, api_secret: sec-aaaaaaaa}\nconnections:\n  - "+tc.conn+"\n"),
				func(k string) (string, bool) { v, ok := serverEnv[k]; return v, ok })
			if err == nil {
				_, err = importspec.NewConnections(cfg.Connections, kinds.Registry())
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

func TestCheckSchedule(t *testing.T) {
	cases := []struct {
		schedule string
		floor    time.Duration
		want     string // "" = accepted
	}{
		{"", 0, ""}, {"api", 0, ""}, {"@hourly", 0, ""}, {"@every 15m", 0, ""}, {"* * * * *", 0, ""}, {"@every 1m", 0, ""},
		{"@every 1s", 0, "runs more often than every 1m0s"},
		{"@every 59s", 0, "runs more often than every 1m0s"},
		{"@every 0s", 0, "the interval must be positive"},
		{"@every -1s", 0, "the interval must be positive"},
		{"@every 1ms", time.Second, "runs more often than every 1s"},
		{"@every 0s", time.Second, "the interval must be positive"},
		{"TZ=UTC @every 1s", 0, "runs more often"},
		{"CRON_TZ=Europe/Berlin @every 30s", 0, "runs more often"},
		{"@every 5s", 5 * time.Second, ""},
		{"* * * * * *", 0, "expected exactly 5 fields"}, // no seconds field
		{"*/2 * * * *", 5 * time.Minute, "runs more often than every 5m0s"},
		{"*/5 * * * *", 5 * time.Minute, ""},
		{"0-4 0 1 1 *", 5 * time.Minute, "runs more often"}, // five minutes once a year
		{"0 3 29 2 *", time.Hour, ""},
	}
	for _, tc := range cases {
		t.Run(tc.schedule, func(t *testing.T) {
			err := importspec.CheckSchedule(tc.schedule, tc.floor)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// Validate applies the floor with the key named.
	im, err := importspec.Parse("x.yaml", []byte(strings.Replace(good, "@every 15m", "@every 1s", 1)), registry(), env(map[string]string{"WH_PATH": "/w"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(registry(), nil); err == nil || !strings.Contains(err.Error(), "x.yaml: schedule: \"@every 1s\" runs more often") {
		t.Fatalf("validate: %v", err)
	}
}
