package config

import (
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	minimal := "projects:\n  - id: 1\n    name: A\n    token: tok-aaaaaaaa\n    api_secret: sec-aaaaaaaa\n"
	for _, tc := range []struct {
		value string
		want  int64
	}{
		{"", 0},
		{"128MB", 128 << 20},
		{"2GB", 2 << 30},
		{"2gib", 2 << 30},
		{"1.5GB", 3 << 29},
		{"524288KB", 512 << 20},
		{"67108864", 64 << 20},
		{" 256 MiB ", 256 << 20},
	} {
		c, err := Parse("t.yaml", []byte("memory_limit: \""+tc.value+"\"\n"+minimal), env(nil))
		if err != nil {
			t.Fatalf("memory_limit %q: %v", tc.value, err)
		}
		if got := c.MemoryBudget(); got != tc.want {
			t.Fatalf("memory_limit %q = %d bytes, want %d", tc.value, got, tc.want)
		}
	}
	for _, tc := range []struct{ value, want string }{
		{"lots", `memory_limit: "lots" is not a size (examples: 256MB, 1.5GB, 2GiB)`},
		{"80%", `memory_limit: "80%" is not a size`},
		{"-1GB", `memory_limit: "-1GB" is not a size`},
		{"1e30GB", `memory_limit: "1e30GB" is not a size`},
		{"GB", `memory_limit: "GB" is not a size`},
		{"32MB", `memory_limit: must be at least 64MB; got "32MB"`},
		{"0", `memory_limit: must be at least 64MB; got "0"`},
	} {
		_, err := Parse("bad.yaml", []byte("memory_limit: \""+tc.value+"\"\n"+minimal), env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), "config bad.yaml: ") || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("memory_limit %q: error %v, want %q", tc.value, err, tc.want)
		}
	}
}
