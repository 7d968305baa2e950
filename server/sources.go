package server

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/internal/config"
)

// SourceOptions are the limits every source of cfg's imports runs
// under: files only under allowed_paths, never the server's own (the
// store and every file beside it, the migrations' state, imports_dir,
// the config file), with what errors must not say logged to log.
// allowed_paths may not overlap data_dir at all; a database file the
// operator keeps there (the demo warehouse) is still a source's `path`.
func SourceOptions(cfg *config.Config, log *slog.Logger) (connectors.Options, error) {
	opts := connectors.Options{AllowedPaths: cfg.AllowedPaths, Log: log, ServerPaths: []string{
		filepath.Join(cfg.DataDir, "tributary.duckdb"), // .wal, .log, .keys, .tmp, .lock too: a prefix
		filepath.Join(cfg.DataDir, "migrations"),
		cfg.ImportsDir,
	}}
	if cfg.File() != "" {
		opts.ServerPaths = append(opts.ServerPaths, cfg.File())
	}
	dataDir, err := connectors.ResolvePath(cfg.DataDir)
	if err != nil {
		return connectors.Options{}, fmt.Errorf("config %s: data_dir: %w", cfg.File(), err)
	}
	for i, p := range cfg.AllowedPaths {
		r, err := connectors.ResolvePath(p)
		if err != nil {
			return connectors.Options{}, fmt.Errorf("config %s: allowed_paths[%d]: %w", cfg.File(), i, err)
		}
		if r == dataDir || strings.HasPrefix(r, dataDir+string(filepath.Separator)) || strings.HasPrefix(dataDir, r+string(filepath.Separator)) {
			return connectors.Options{}, fmt.Errorf("config %s: allowed_paths[%d]: %s overlaps data_dir %s: %w", cfg.File(), i, p, cfg.DataDir, connectors.ErrRefused)
		}
	}
	resolved, err := opts.Resolved()
	if err != nil {
		return connectors.Options{}, fmt.Errorf("config %s: %w", cfg.File(), err)
	}
	return resolved, nil
}

// SourceRegistry is every source kind under cfg's limits.
func SourceRegistry(cfg *config.Config, log *slog.Logger) (*connectors.Registry, error) {
	opts, err := SourceOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	return kinds.RegistryWith(opts), nil
}
