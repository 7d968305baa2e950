package server

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/internal/config"
)

// allowed_paths may not overlap data_dir, imports_dir or the config
// file; what is allowed comes out resolved, with the server's own files
// listed for every source to refuse.
func TestSourceOptions(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{DataDir: filepath.Join(dir, "data"), ImportsDir: filepath.Join(dir, "imports")}
	for _, tc := range []struct {
		allowed []string
		want    string // "" = accepted
	}{
		{[]string{filepath.Join(dir, "files")}, ""},
		{[]string{filepath.Join(dir, "files"), filepath.Join(dir, "one.parquet")}, ""},
		{[]string{dir}, "allowed_paths[0]"},
		{[]string{filepath.Join(dir, "files"), filepath.Join(dir, "data")}, "allowed_paths[1]"},
		{[]string{filepath.Join(dir, "data", "exports")}, "allowed_paths[0]"},
		{[]string{filepath.Join(dir, "imports")}, "allowed_paths[0]"},
	} {
		cfg.AllowedPaths = tc.allowed
		opts, err := SourceOptions(cfg, nil)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.allowed, err)
				continue
			}
			if !opts.ServerPath(filepath.Join(dir, "data", "tributary.duckdb.log", "000001.seg")) || !opts.ServerPath(filepath.Join(dir, "imports", "x.yaml")) {
				t.Errorf("%v: server paths %v miss the write log or imports_dir", tc.allowed, opts.ServerPaths)
			}
			if opts.ServerPath(filepath.Join(dir, "data", "demo-warehouse.duckdb")) {
				t.Errorf("the operator's warehouse file in data_dir is refused as a server file")
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, connectors.ErrRefused) {
			t.Errorf("%v: %v; want a refusal naming %s", tc.allowed, err, tc.want)
		}
	}
}
