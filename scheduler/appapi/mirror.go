package appapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// forgetMirror drops a Mirror import's state and change feed before the
// import is deleted (whether or not its data goes): an import created
// again under the same id starts from nothing. It answers the request
// itself when it returns false.
func (s *Server) forgetMirror(a *appRequest, e scheduler.Entry) bool {
	if !e.Import.IsMirror() {
		return true
	}
	if err := run.ForgetMirror(a.r.Context(), s.sched.Catalog().Registry(), s.store, e.Import); err != nil {
		s.log.Error("deleting a mirror import's state", "project", a.project, "import", e.Import.ID, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, fmt.Sprintf("the mirror state of import %s could not be dropped; retry the DELETE", e.Import.ID))
		return false
	}
	return true
}

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
