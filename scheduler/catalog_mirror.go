package scheduler

import "github.com/tributary-dev/tributary/connectors"

// Registry is the source registry the catalog's imports open, for
// callers that must reach an import's source outside a run (dropping a
// Mirror import's change feed).
func (c *Catalog) Registry() *connectors.Registry { return c.reg }
