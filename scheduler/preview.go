package scheduler

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/engine/preview"
)

// Preview dry-runs an import as its runs see it (the app API's changes
// applied): reads up to limit rows through its source and maps them,
// writing nothing anywhere.
func (c *Catalog) Preview(ctx context.Context, project int64, id string, limit int64) (*preview.Report, error) {
	e, ok := c.Get(project, id)
	if !ok || e.Deleted {
		return nil, fmt.Errorf("%w: no import %q in project %d", ErrNotFound, id, project)
	}
	return preview.Run(ctx, preview.Options{Registry: c.reg, Import: e.Import, Project: e.Project, Limit: limit, Now: c.now()})
}
