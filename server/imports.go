package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/scheduler"
)

// loadImports checks the config's connections and reads and validates
// imports_dir; a bad connection or file stops the start with the file,
// the key and what is wrong.
func loadImports(cfg *config.Config) ([]*importspec.Import, error) {
	reg, err := SourceRegistry(cfg, nil)
	if err != nil {
		return nil, err
	}
	conns, err := Connections(cfg)
	if err != nil {
		return nil, err
	}
	ims, err := importspec.Loader{Registry: reg, Connections: conns}.Dir(cfg.ImportsDir)
	if err != nil {
		return nil, err
	}
	for _, im := range ims {
		if err := im.Check(ImportRules(cfg)); err != nil {
			return nil, err
		}
	}
	return ims, nil
}

// Connections are the config's connections checked against the
// connector registry (errors name the config file and the key).
func Connections(cfg *config.Config) (*importspec.Connections, error) {
	conns, err := importspec.NewConnections(cfg.Connections, kinds.Registry())
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", cfg.File(), err)
	}
	return conns, nil
}

// ImportRules are the config's rules for imports: its projects and the
// schedule floor.
func ImportRules(cfg *config.Config) importspec.Rules {
	return importspec.Rules{Registry: kinds.Registry(), Projects: ProjectLookup(cfg), MinInterval: time.Duration(cfg.MinScheduleInterval)}
}

// ProjectLookup answers importspec's questions about the config's projects.
func ProjectLookup(cfg *config.Config) func(int64) (importspec.Project, bool) {
	return func(id int64) (importspec.Project, bool) {
		for _, p := range cfg.Projects {
			if p.ID == id {
				return importspec.Project{ID: id, Mode: p.IDMode()}, true
			}
		}
		return importspec.Project{}, false
	}
}

// NewScheduler builds the import catalog (files plus the app API's
// imports in the store) and the scheduler over it, not yet started.
// Its lease figures go to met.
func NewScheduler(ctx context.Context, cfg *config.Config, files []*importspec.Import, st store.Store, log *slog.Logger, met *metrics.Registry) (*scheduler.Scheduler, error) {
	reg, err := SourceRegistry(cfg, log)
	if err != nil {
		return nil, err
	}
	conns, err := Connections(cfg)
	if err != nil {
		return nil, err
	}
	cat, err := scheduler.NewCatalog(ctx, scheduler.CatalogOptions{Store: st, Registry: reg, Projects: ProjectLookup(cfg), Files: files,
		Connections: conns, MinInterval: time.Duration(cfg.MinScheduleInterval), Log: log,
		ConnectionKey: cfg.ConnectionKeyBytes(), HostAllowed: cfg.HostAllowed})
	if err != nil {
		return nil, fmt.Errorf("imports: %w", err)
	}
	runner := &run.Runner{Registry: reg, Store: st, Log: log}
	return scheduler.New(cat, scheduler.Options{Runner: runner, Store: st, Log: log,
		Lease: time.Duration(cfg.SyncLease), Metrics: met, Monitor: newMonitor(cfg, st, cat, log)}), nil
}
