package config

import (
	"strings"
	"testing"
)

func TestCORSAllowedOrigins(t *testing.T) {
	const base = "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: sec-aaaaaaaa\n"
	parse := func(t *testing.T, list string) (*Project, error) {
		t.Helper()
		y := base
		if list != "" {
			y += "    cors_allowed_origins: " + list + "\n"
		}
		c, err := Parse("t.yaml", []byte(y), env(nil))
		if err != nil {
			return nil, err
		}
		return &c.Projects[0], nil
	}
	t.Run("valid", func(t *testing.T) {
		tests := []struct {
			name, list string
			allow      []string
			refuse     []string
		}{
			{"unset allows every origin", "", []string{"https://a.example", "http://localhost:3000"}, nil},
			{"listed origins only, any case", `["https://Shop.Example", "http://localhost:3000"]`,
				[]string{"https://shop.example", "HTTPS://SHOP.EXAMPLE", "http://localhost:3000"},
				[]string{"https://evil.example", "http://shop.example", "http://localhost:3001", "null", ""}},
			{"empty list allows none", "[]", nil, []string{"https://a.example", ""}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p, err := parse(t, tc.list)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range tc.allow {
					if !p.AllowsOrigin(o) {
						t.Errorf("AllowsOrigin(%q) = false", o)
					}
				}
				for _, o := range tc.refuse {
					if p.AllowsOrigin(o) {
						t.Errorf("AllowsOrigin(%q) = true", o)
					}
				}
			})
		}
	})
	t.Run("invalid", func(t *testing.T) {
		tests := []struct{ name, list, want string }{
			{"star", `["*"]`, `projects[0].cors_allowed_origins[0]: leave the list out to allow every origin; got "*"`},
			{"no scheme", `["shop.example"]`, `projects[0].cors_allowed_origins[0]: must be an origin, scheme://host[:port]; got "shop.example"`},
			{"path", `["https://a.example", "https://shop.example/app"]`, `projects[0].cors_allowed_origins[1]: must be an origin, scheme://host[:port], with no path, query or trailing slash; got "https://shop.example/app"`},
			{"trailing slash", `["https://shop.example/"]`, "with no path, query or trailing slash"},
			{"twice", `["https://shop.example", "https://SHOP.example"]`, `projects[0].cors_allowed_origins[1]: "https://shop.example" is listed twice`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := parse(t, tc.list)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want it to contain %q", err, tc.want)
				}
			})
		}
	})
}
