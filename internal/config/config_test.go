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
    api_secret: "${SHOP_SECRET:-fallback-secret}"
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
	c, err := Parse("t.yaml", []byte(good), env(map[string]string{"SHOP_TOKEN": "shop-token-123"}))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Projects[0]
	if p.Token != "shop-token-123" || p.APISecret != "fallback-secret" {
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
		{"store", "store: mysql://x\n" + base(""), `store: must be empty or "embedded"`},
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
	c, err := Load("../../configs/tributary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Projects) == 0 || c.Projects[0].ServiceAccounts[0].Role != RoleOwner {
		t.Fatalf("demo config: %+v", c.Projects)
	}
}
