package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// loadImports reads and validates imports_dir; a bad file stops the start
// with the file, the key and what is wrong.
func loadImports(cfg *config.Config) ([]*importspec.Import, error) {
	reg := kinds.Registry()
	ims, err := importspec.LoadDir(cfg.ImportsDir, reg, nil)
	if err != nil {
		return nil, err
	}
	for _, im := range ims {
		if err := im.Validate(reg, projectLookup(cfg)); err != nil {
			return nil, err
		}
	}
	return ims, nil
}

func projectLookup(cfg *config.Config) func(int64) (importspec.Project, bool) {
	return func(id int64) (importspec.Project, bool) {
		for _, p := range cfg.Projects {
			if p.ID == id {
				return importspec.Project{ID: id, Simplified: p.IDManagement != config.IDOriginal}, true
			}
		}
		return importspec.Project{}, false
	}
}

// startupSyncs runs every unpaused import once, one after another, so a
// new user sees data on the first command. Scheduling proper lives in
// scheduler/. The returned wait blocks until the runs have stopped.
func startupSyncs(ctx context.Context, cfg *config.Config, ims []*importspec.Import, st store.Store, log *slog.Logger) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := &run.Runner{Registry: kinds.Registry(), Store: st, Log: log}
		lookup := projectLookup(cfg)
		for _, im := range ims {
			if im.Paused {
				continue
			}
			p, _ := lookup(im.ProjectID)
			runID := fmt.Sprintf("%s-%d", im.ID, time.Now().UnixMilli())
			stats, err := r.Run(ctx, im, p, runID)
			switch {
			case errors.Is(err, run.ErrNotSupported):
				log.Info("import skipped", "import", im.ID, "reason", err.Error())
			case err != nil:
				log.Error("sync failed", "import", im.ID, "run", runID, "err", err)
			case stats.Failed > 0:
				log.Warn("sync refused rows", "import", im.ID, "run", runID, "failed", stats.Failed, "first", stats.Failures[0].Error())
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return wg.Wait
}
