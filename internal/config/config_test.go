package config

import (
	"strings"
	"testing"
)

const good = `
listen: 127.0.0.1:9000
region: eu
projects:
  - id: 7
    name: Shop
    token: "${SHOP_TOKEN}"
    api_secret: "${SHOP_SECRET}"
    region: eu
    id_management: original
    service_accounts:
      - {username: bot, secret: bot-secret-1, role: admin}
    rate_limit: {bytes_per_minute: 10MB}
`

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseGood(t *testing.T) {
	c, err := Parse("t.yaml", []byte(good), env(map[string]string{"SHOP_TOKEN": "shop-token-123", "SHOP_SECRET": "shop-secret-123"}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Projects[0]
	if p.Token != "shop-token-123" || p.APISecret != "shop-secret-123" {
		t.Fatalf("interpolation: token=%q secret=%q", p.Token, p.APISecret)
	}
	if p.RateLimit.BytesPerMinute != 10<<20 || p.IDManagement != IDOriginal || c.Region != RegionEU {
		t.Fatalf("decoded %+v", p)
	}
	if c.DataDir != "./data" || c.OAuthTTL != Duration(3600e9) {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if c.Projects[0].ServiceAccounts[0].Role != RoleAdmin || !RoleAdmin.CanWrite() || RoleAnalyst.CanWrite() {
		t.Fatal("roles")
	}
}

func TestParseErrorsNameFileAndKey(t *testing.T) {
	base := func(project string) string {
		return "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: sec-aaaaaaaa\n" + project
	}
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown key", "listn: x\n" + base(""), "field listn not found"},
		{"missing env", "projects:\n  - id: 1\n    name: A\n    token: ${NOPE}\n", "line 4: environment variable NOPE is not set"},
		{"no projects", "listen: 127.0.0.1:1\n", "projects: at least one project is required"},
		{"bad listen", "listen: nope\n" + base(""), "listen: must be host:port"},
		{"bad region", "region: mars\n" + base(""), `region: must be one of us, eu, in; got "mars"`},
		{"bad project region", base("    region: uk\n"), `projects[0].region: must be one of us, eu, in; got "uk"`},
		{"id mode", base("    id_management: fancy\n"), `projects[0].id_management: must be original or simplified`},
		{"short token", "projects:\n  - id: 1\n    name: A\n    token: x\n    api_secret: sec-aaaaaaaa\n", "projects[0].token: must be at least 8 characters"},
		{"zero id", "projects:\n  - id: 0\n    name: A\n", "projects[0].id: must be a positive integer"},
		{"role", base("    service_accounts:\n      - {username: u, secret: ssssssss, role: god}\n"), `projects[0].service_accounts[0].role: must be one of owner, admin, analyst, consumer; got "god"`},
		{"dup id", base("") + "  - id: 1\n    name: B\n    token: tok-bbbbbbbb\n    api_secret: sec-bbbbbbbb\n", "projects[1].id: 1 is already used by projects[0]"},
		{"dup secret", base("") + "  - id: 2\n    name: B\n    token: tok-bbbbbbbb\n    api_secret: sec-aaaaaaaa\n", "projects[1].api_secret: must be unique"},
		{"bad size", base("    rate_limit: {bytes_per_minute: lots}\n"), `"lots" is not a size`},
		{"wrong type", base("    service_accounts: 3\n"), "cannot unmarshal"},
		{"store", "store: mysql://u:hunter2@x\n" + base(""), `store: must be "embedded" (the default) or a postgres:// URL; got "mysql://u:xxxxx@x"`},
		{"bad postgres url", "store: postgres://u:hunter2@db:notaport/x\n" + base(""), `store: postgres://… is not a valid URL: invalid port`},
		{"bad postgres param", "store: postgres://u:hunter2@db/x?sslmode=sometimes\n" + base(""), `store: postgres://u:xxxxx@db/x?sslmode=sometimes is not a valid PostgreSQL URL`},
		{"short lease", "sync_lease: 500ms\n" + base(""), "sync_lease: must be at least 1s"},
		{"dedup keys", "dedup_keys: ssd\n" + base(""), `dedup_keys: is deprecated and ignored, but when set must be "memory" or "disk"; got "ssd"`},
		{"tls cert without key", "tls_cert_file: c.pem\n" + base(""), "tls_key_file: must be set when tls_cert_file is set"},
		{"tls key without cert", "tls_key_file: k.pem\n" + base(""), "tls_cert_file: must be set when tls_key_file is set"},
		{"redirect without tls", "redirect_http_listen: :80\n" + base(""), "redirect_http_listen: needs tls_cert_file and tls_key_file"},
		{"bad redirect", "tls_cert_file: c.pem\ntls_key_file: k.pem\nredirect_http_listen: eighty\n" + base(""), `redirect_http_listen: must be host:port, got "eighty"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml), env(nil))
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.HasPrefix(err.Error(), "config bad.yaml: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant prefix %q and %q", err, "config bad.yaml: ", tc.want)
			}
		})
	}
}

func TestDemoConfigLoads(t *testing.T) {
	// The values `make run` exports (Makefile): demo-only.
	for k, v := range map[string]string{"TRIBUTARY_DEMO_SECRET": "demo-api-secret",
		"TRIBUTARY_DEMO_SA_SECRET": "demo-sa-secret", "TRIBUTARY_DEMO_ANALYST_SECRET": "demo-analyst-secret"} {
		t.Setenv(k, v)
	}
	c, err := Load("../../configs/tributary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Projects) == 0 || c.Projects[0].ServiceAccounts[0].Role != RoleOwner {
		t.Fatalf("demo config: %+v", c.Projects)
	}
	if conn, ok := c.Connection("demo-warehouse"); !ok || conn.Kind != "duckdb" || !conn.AllowedFor(1) {
		t.Fatalf("demo connection: %+v", c.Connections)
	}
}

// store: postgres://… (here from the environment) selects the Postgres
// store; no error and no log description shows the password.
func TestStoreSelection(t *testing.T) {
	minimal := "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: sec-aaaaaaaa\n"
	c, err := Parse("t.yaml", []byte(minimal), env(nil))
	if err != nil || c.StoreKind() != StoreEmbedded || c.StoreRedacted() != "embedded" || c.SyncLease != Duration(30e9) {
		t.Fatalf("default store: %v %q %q %v", err, c.StoreKind(), c.StoreRedacted(), c.SyncLease)
	}
	c, err = Parse("t.yaml", []byte("store: ${PG_URL}\nsync_lease: 2s\n"+minimal),
		env(map[string]string{"PG_URL": "postgres://app:hunter2@db.internal:5432/tributary?sslmode=disable"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.StoreKind() != StorePostgres || c.Store != "postgres://app:hunter2@db.internal:5432/tributary?sslmode=disable" || c.SyncLease != Duration(2e9) {
		t.Fatalf("postgres store: %q %q %v", c.StoreKind(), c.Store, c.SyncLease)
	}
	if got := c.StoreRedacted(); strings.Contains(got, "hunter2") || !strings.Contains(got, "db.internal:5432/tributary") {
		t.Fatalf("redacted: %q", got)
	}
	c.Store = "postgresql://app@db/x?password=hunter2"
	if got := c.StoreRedacted(); strings.Contains(got, "hunter2") {
		t.Fatalf("redacted: %q", got)
	}
	for _, bad := range []string{"postgres://app:hunter2@db:99999999/x", "postgres://app:hunter2@db/x?sslmode=maybe", "postgres://app:hunter2@[db/x"} {
		_, err := Parse("t.yaml", []byte("store: "+bad+"\n"+minimal), env(nil))
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "config t.yaml: store: ") {
			t.Fatalf("store %q: %v", bad, err)
		}
	}
}
