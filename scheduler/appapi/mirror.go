package appapi

import (
	"context"

	"github.com/tributary-dev/tributary/ingest/store"
)

// mirrorView is what a Mirror run did to the table's rows.
type mirrorView struct {
	Inserted  int64 `json:"num_inserted"`
	Updated   int64 `json:"num_updated"`
	Deleted   int64 `json:"num_deleted"`
	Unchanged int64 `json:"num_unchanged"`
}

// addMirrorCounts adds the counts of the Mirror runs among runs to their
// views (out[i] is runs[i]'s). A failure only leaves them out.
func (s *Server) addMirrorCounts(ctx context.Context, project int64, runs []store.Run, out []runView) {
	ms, ok := s.store.(store.Mirrors)
	if !ok || len(runs) == 0 {
		return
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	counts, err := ms.MirrorRunCounts(ctx, project, ids)
	if err != nil {
		s.log.Warn("reading mirror run counts", "project", project, "err", err)
		return
	}
	for i, r := range runs {
		if c, ok := counts[r.ID]; ok {
			out[i].Mirror = &mirrorView{Inserted: c.Inserted, Updated: c.Updated, Deleted: c.Deleted, Unchanged: c.Unchanged}
		}
	}
}
