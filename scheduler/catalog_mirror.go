package scheduler

import (
	"context"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Registry is the source registry the catalog's imports open, for
// callers that must reach an import's source outside a run (dropping a
// Mirror import's change feed).
func (c *Catalog) Registry() *connectors.Registry { return c.reg }

// ForgetRemovedMirrors drops what the Mirror imports the catalog no
// longer lists kept — their state and Postgres change feed — as the app
// API's DELETE does (run.ForgetRemovedMirrors): an import file removed
// from imports_dir is only seen at the next start. Imports left out at
// start (their ids stay taken) count as listed. A change feed's source is
// looked for among the config's connections and the catalog's imports.
func (c *Catalog) ForgetRemovedMirrors(ctx context.Context, st store.Store) error {
	c.mu.Lock()
	known := map[key]bool{}
	var cfgs []connectors.Config
	for k, e := range c.entries {
		known[k] = true
		if e.Import != nil {
			cfgs = append(cfgs, e.Import.SourceConfig())
		}
	}
	for k := range c.leftOut {
		known[k] = true
	}
	c.mu.Unlock()
	for _, id := range c.conns.IDs() {
		if cn, ok := c.conns.Lookup(id); ok {
			cfgs = append(cfgs, connectors.Config{Kind: cn.Kind, Fields: cn.Fields})
		}
	}
	srcs := run.KnownSources{Connection: c.conns.Resolve, Configs: cfgs}
	return run.ForgetRemovedMirrors(ctx, c.reg, st, srcs, func(project int64, id string) bool { return known[key{project, id}] }, c.log)
}
