package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const oneProject = "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: sec-aaaaaaaa\n"
const twoProjects = oneProject + "  - id: 2\n    name: B\n    token: tok-bbbbbbbb\n    api_secret: sec-bbbbbbbb\n"

// ${VAR:-default} is refused where a secret goes (the default would be
// the secret of every deployment that forgot the variable), taken
// elsewhere; aliases and merge keys are refused everywhere.
func TestSecretForms(t *testing.T) {
	cases := []struct {
		name, yaml, want string // want "" = accepted
	}{
		{"api_secret default", "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: ${S:-sec-aaaaaaaa}\n",
			"projects[0].api_secret: line 5: ${VAR:-default} is not accepted for a secret"},
		{"service account default", oneProject + "    service_accounts:\n      - {username: u, secret: \"${U:-ssssssss}\", role: owner}\n",
			"projects[0].service_accounts[0].secret: line 7: ${VAR:-default}"},
		{"metrics token default", "metrics_token: ${M:-0123456789abcdef}\n" + oneProject, "metrics_token: line 1: ${VAR:-default}"},
		{"store default", "store: ${PG:-postgres://u:hunter2@h/db}\n" + oneProject, "store: line 1: ${VAR:-default}"},
		{"token default", "projects:\n  - id: 1\n    name: A\n    token: ${T:-tok-aaaaaaaa}\n    api_secret: sec-aaaaaaaa\n", ""},
		{"listen default", "listen: ${L:-127.0.0.1:9}\n" + oneProject, ""},
		{"literal secret", oneProject, ""},
		{"unset in a comment", "# store: ${NOPE}\nlisten: 127.0.0.1:9 # ${NOPE}\n" + oneProject, ""},
		{"merge key", "base: &b {token: tok-aaaaaaaa, api_secret: sec-aaaaaaaa}\nprojects:\n  - <<: *b\n    id: 1\n    name: A\n",
			"line 3: YAML merge keys (<<) are not accepted"},
		{"inline merge", "projects:\n  - <<: {token: tok-aaaaaaaa, api_secret: sec-aaaaaaaa}\n    id: 1\n    name: A\n",
			"line 2: YAML merge keys (<<) are not accepted"},
		{"alias", "projects:\n  - id: 1\n    name: A\n    token: &t tok-aaaaaaaa\n    api_secret: *t\n", "line 5: YAML aliases (*t)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml), env(nil))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want accepted, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Fatalf("the error shows the default's password: %v", err)
			}
		})
	}
}

// A value from the environment stays one value, whatever YAML it holds.
func TestExpandedValueKeepsStructure(t *testing.T) {
	c, err := Parse("c.yaml", []byte("projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: ${S}\n"),
		env(map[string]string{"S": "x: y, {z}\n  - id: 9"}))
	if err != nil || len(c.Projects) != 1 || c.Projects[0].APISecret != "x: y, {z}\n  - id: 9" {
		t.Fatalf("%v %+v", err, c)
	}
}

func TestMinScheduleInterval(t *testing.T) {
	c, err := Parse("c.yaml", []byte(oneProject), env(nil))
	if err != nil || time.Duration(c.MinScheduleInterval) != time.Minute {
		t.Fatalf("default: %v %v", err, c.MinScheduleInterval)
	}
	c, err = Parse("c.yaml", []byte("min_schedule_interval: 5s\n"+oneProject), env(nil))
	if err != nil || time.Duration(c.MinScheduleInterval) != 5*time.Second {
		t.Fatalf("5s: %v %v", err, c.MinScheduleInterval)
	}
	for _, v := range []string{"500ms", "-1m"} {
		if _, err := Parse("c.yaml", []byte("min_schedule_interval: "+v+"\n"+oneProject), env(nil)); err == nil ||
			!strings.Contains(err.Error(), "min_schedule_interval: must be at least 1s") {
			t.Fatalf("%s: %v", v, err)
		}
	}
}

func TestConnections(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "dsn")
	if err := os.WriteFile(secret, []byte("postgres://r:from-file@db/w\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Parse("c.yaml", []byte(twoProjects+`connections:
  - id: wh
    kind: postgres
    dsn: ${WH_DSN}
    projects: [2]
  - id: "7"
    kind: postgres
    dsn: {file: `+secret+`}
    projects: [1, 2]
`), env(map[string]string{"WH_DSN": "postgres://r:from-env@db/w"}))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := c.Connection("wh")
	if wh.Kind != "postgres" || wh.Fields["dsn"] != "postgres://r:from-env@db/w" || wh.Raw["dsn"] != "${WH_DSN}" ||
		!wh.AllowedFor(2) || wh.AllowedFor(1) {
		t.Fatalf("wh: %+v", wh)
	}
	f, _ := c.Connection("7")
	if f.Fields["dsn"] != "postgres://r:from-file@db/w" || f.Files["dsn"] != secret || f.Raw["dsn"] != "" {
		t.Fatalf("file secret: %+v", f)
	}
	// One project: projects defaults to it.
	c, err = Parse("c.yaml", []byte(oneProject+"connections:\n  - {id: wh, kind: duckdb, path: /w.duckdb}\n"), env(nil))
	if conn, _ := c.Connection("wh"); err != nil || !conn.AllowedFor(1) {
		t.Fatalf("default projects: %v %+v", err, c.Connections)
	}

	bad := []struct{ name, yaml, want string }{
		{"no id", oneProject + "connections:\n  - {kind: duckdb}\n", "connections[0].id: is required"},
		{"bad id", oneProject + "connections:\n  - {id: 'a b', kind: duckdb}\n", `connections[0].id: "a b": use letters`},
		{"dup id", oneProject + "connections:\n  - {id: a, kind: duckdb}\n  - {id: a, kind: duckdb}\n", `connections[1].id: "a" is already used by connections[0]`},
		{"no kind", oneProject + "connections:\n  - {id: a}\n", "connections[0].kind: is required"},
		{"projects required", twoProjects + "connections:\n  - {id: a, kind: duckdb}\n", "connections[0].projects: is required when the server has more than one project"},
		{"unknown project", twoProjects + "connections:\n  - {id: a, kind: duckdb, projects: [1, 3]}\n", "connections[0].projects[1]: no project 3"},
		{"projects not a list", oneProject + "connections:\n  - {id: a, kind: duckdb, projects: all}\n", "projects: must be a list of project ids"},
		{"missing file", oneProject + "connections:\n  - {id: a, kind: postgres, dsn: {file: /nonexistent/dsn}}\n", "dsn: reading {file: /nonexistent/dsn}"},
		{"list value", oneProject + "connections:\n  - {id: a, kind: duckdb, path: [x]}\n", "path: must be a string, a ${VAR} or {file: PATH}"},
		{"unset var", oneProject + "connections:\n  - {id: a, kind: postgres, dsn: '${NOPE}'}\n", "connections[0].dsn: line 7: environment variable NOPE is not set"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConnectionKeyAndHosts(t *testing.T) {
	key := strings.Repeat("ab", 32)
	c, err := Parse("c.yaml", []byte("connection_key: ${K}\nconnection_hosts_allowed: [db.internal:5432, replica.internal, '[::1]:5432']\n"+oneProject),
		env(map[string]string{"K": key}))
	if err != nil || len(c.ConnectionKeyBytes()) != 32 {
		t.Fatalf("%v %v", err, c)
	}
	for _, tc := range []struct {
		host, port string
		ok         bool
	}{
		{"db.internal", "5432", true}, {"DB.internal", "5432", true}, {"db.internal", "5433", false},
		{"replica.internal", "6543", true}, {"::1", "5432", true}, {"127.0.0.1", "5432", false}, {"db.internal,127.0.0.1", "5432", false},
	} {
		if got := c.HostAllowed(tc.host, tc.port); got != tc.ok {
			t.Errorf("HostAllowed(%s, %s) = %v", tc.host, tc.port, got)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"connection_key: tooshort\n", "connection_key: must be 32 random bytes"},
		{"connection_key: ${K:-" + key + "}\n", "connection_key: line 1: ${VAR:-default} is not accepted for a secret"},
		{"connection_hosts_allowed: ['a,b']\n", `connection_hosts_allowed[0]: "a,b": give host or host:port`},
		{"connection_hosts_allowed: [':5432']\n", `connection_hosts_allowed[0]`},
	} {
		if _, err := Parse("c.yaml", []byte(tc.yaml+oneProject), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// The commands that only read imports run without the server's own
// secrets set, but never without a connection's.
func TestLoadForImports(t *testing.T) {
	for _, k := range []string{"TRIBUTARY_DEMO_SECRET", "TRIBUTARY_DEMO_SA_SECRET", "TRIBUTARY_DEMO_ANALYST_SECRET"} {
		if _, set := os.LookupEnv(k); set {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	if _, err := Load("../../configs/tributary.yaml"); err == nil || !strings.Contains(err.Error(), "environment variable TRIBUTARY_DEMO_SECRET is not set") {
		t.Fatalf("serve's load without the secrets: %v", err)
	}
	c, err := LoadForImports("../../configs/tributary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if conn, ok := c.Connection("demo-warehouse"); !ok || conn.Fields["path"] == "" {
		t.Fatalf("connections: %+v", c.Connections)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ yaml, want string }{
		{"store: ${TRIB_TEST_UNSET_STORE}\nmetrics_token: ${M}\n" + oneProject, ""},
		{oneProject + "connections:\n  - {id: a, kind: postgres, dsn: '${TRIB_TEST_UNSET_DSN}'}\n", "connections[0].dsn: line 7: environment variable TRIB_TEST_UNSET_DSN is not set"},
		{"metrics_token: ${M:-0123456789abcdef}\n" + oneProject, "${VAR:-default} is not accepted"},
	} {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := LoadForImports(p)
		switch {
		case tc.want == "" && (err != nil || c.StoreKind() != StoreEmbedded):
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
