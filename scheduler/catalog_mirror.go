package scheduler

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
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
//
// On a shared store (shared: several processes on one Postgres database,
// each with its own imports_dir) an import this process does not list
// may still be another's — in a rolling deploy that adds a file, the
// processes not yet restarted lack it — and dropping its state would
// make its next run see every row as new and lose its deletes. There the
// removed imports are only logged, with what drops them by hand.
func (c *Catalog) ForgetRemovedMirrors(ctx context.Context, st store.Store, shared bool) error {
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
	listed := func(project int64, id string) bool {
		if known[key{project, id}] {
			return true
		}
		if shared {
			feed := run.FeedName(&importspec.Import{ID: id, ProjectID: project})
			c.log.Warn("a mirror import this process does not list has state in the shared store; kept, since another process may still run it — once no process lists it, drop its change feed by hand on the warehouse (its state then only takes space)",
				"project", project, "import", id,
				"sql", fmt.Sprintf("SELECT pg_drop_replication_slot('%s'); DROP PUBLICATION IF EXISTS %s;", feed, feed))
			return true
		}
		return false
	}
	return run.ForgetRemovedMirrors(ctx, c.reg, st, srcs, listed, c.log)
}
