package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/scheduler"
)

// loadImports reads and validates imports_dir; a bad file stops the start
// with the file, the key and what is wrong.
func loadImports(cfg *config.Config) ([]*importspec.Import, error) {
	reg, err := SourceRegistry(cfg, nil)
	if err != nil {
		return nil, err
	}
	ims, err := importspec.LoadDir(cfg.ImportsDir, reg, nil)
	if err != nil {
		return nil, err
	}
	for _, im := range ims {
		if err := im.Validate(reg, ProjectLookup(cfg)); err != nil {
			return nil, err
		}
	}
	return ims, nil
}

// ProjectLookup answers importspec's questions about the config's projects.
func ProjectLookup(cfg *config.Config) func(int64) (importspec.Project, bool) {
	return func(id int64) (importspec.Project, bool) {
		for _, p := range cfg.Projects {
			if p.ID == id {
				return importspec.Project{ID: id, Simplified: p.IDManagement != config.IDOriginal}, true
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
	cat, err := scheduler.NewCatalog(ctx, scheduler.CatalogOptions{Store: st, Registry: reg, Projects: ProjectLookup(cfg), Files: files})
	if err != nil {
		return nil, fmt.Errorf("imports: %w", err)
	}
	runner := &run.Runner{Registry: reg, Store: st, Log: log}
	return scheduler.New(cat, scheduler.Options{Runner: runner, Store: st, Log: log,
		Lease: time.Duration(cfg.SyncLease), Metrics: met}), nil
}
