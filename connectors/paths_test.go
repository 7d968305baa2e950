package connectors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Paths are judged after symlinks, as far as they exist, and an allowed
// path may neither hold nor lie inside the server's own files.
func TestPathLimits(t *testing.T) {
	dir := t.TempDir()
	data, in := filepath.Join(dir, "data"), filepath.Join(dir, "in")
	for _, d := range []string{filepath.Join(data, "tributary.duckdb.log"), in} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(data, filepath.Join(in, "link")); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(data, "tributary.duckdb")
	opts, err := Options{AllowedPaths: []string{in}, ServerPaths: []string{store}}.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path    string
		allowed bool
	}{
		{filepath.Join(in, "a.csv"), true},
		{filepath.Join(in, "sub", "not-yet.parquet"), true},
		{in + "box/a.csv", false}, // a sibling sharing the prefix
		{filepath.Join(in, "..", "data", "x.csv"), false},
		{filepath.Join(in, "link", "tributary.duckdb.log", "000001.seg"), false}, // a symlink into the write log
		{filepath.Join(in, "link", "other.csv"), false},                          // resolves outside the allowed path
		{"/etc/passwd", false},
	} {
		r, err := ResolvePath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := opts.Allowed(r); got != tc.allowed {
			t.Errorf("%s (resolved %s): allowed %v, want %v", tc.path, r, got, tc.allowed)
		}
	}
	for _, bad := range []string{dir, data, filepath.Join(data, "tributary.duckdb.log"), ""} {
		_, err := Options{AllowedPaths: []string{bad}, ServerPaths: []string{store}}.Resolved()
		if err == nil || !strings.Contains(err.Error(), "allowed_paths[0]") {
			t.Errorf("allowed path %q: %v, want an error naming allowed_paths[0]", bad, err)
		}
	}
}

// A key or certificate field may not name the server's own files.
func TestGuardPaths(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "tributary.duckdb")
	opened := false
	k := GuardPaths(Kind{Name: "k", Fields: []Field{{Name: "key_file", Path: true}, {Name: "note"}},
		Open: func(context.Context, map[string]string) (Source, error) { opened = true; return nil, nil }},
		Options{ServerPaths: []string{store}})
	for _, tc := range []struct {
		fields map[string]string
		ok     bool
	}{
		{map[string]string{"key_file": filepath.Join(dir, "key.pem")}, true},
		{map[string]string{"key_file": store + ".log/000001.seg"}, false},
		{map[string]string{"note": store}, true}, // not a path field
	} {
		opened = false
		_, err := k.Open(context.Background(), tc.fields)
		if tc.ok != (err == nil) || opened != tc.ok {
			t.Errorf("%v: err %v, opened %v", tc.fields, err, opened)
		}
		if err != nil && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "source.key_file")) {
			t.Errorf("%v: %v, want ErrRefused naming source.key_file", tc.fields, err)
		}
	}
}
