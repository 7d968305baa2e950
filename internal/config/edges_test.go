package config

import (
	"strings"
	"testing"
)

func TestEdges(t *testing.T) {
	const project = "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: sec-aaaaaaaa\n"
	cases := []struct {
		name, yaml string
		want       EdgeLimits
		err        string
	}{
		{"defaults", "", EdgeLimits{0, 1024, 1000}, ""},
		{"set", "max_connections: 2000\nbody_min_rate: 4KB\nip_requests_per_second: 50\n", EdgeLimits{2000, 4096, 50}, ""},
		{"off", "body_min_rate: 0\nip_requests_per_second: 0\n", EdgeLimits{0, 0, 0}, ""},
		{"tiny cap", "max_connections: 3\n", EdgeLimits{}, "max_connections: must be at least 16"},
		{"negative rate", "ip_requests_per_second: -1\n", EdgeLimits{}, "ip_requests_per_second: must be 0 (no limit) or more"},
		{"bad size", "body_min_rate: fast\n", EdgeLimits{}, `"fast" is not a size`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("e.yaml", []byte(tc.yaml+project), env(nil))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Edges(); got != tc.want {
				t.Fatalf("Edges() = %+v, want %+v", got, tc.want)
			}
		})
	}
}
