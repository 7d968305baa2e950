package appapi

import (
	"fmt"
	"net/http"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// deleteImportData removes what an import stored, before the import
// itself is deleted: its events (their dedup keys freed, so the rows can
// be imported again), the profile properties it owns, and its checkpoint.
// Every step is idempotent and the import goes last, so after a failure
// the import is still there, paused, and the same DELETE finishes the
// job. It answers the request itself when it returns false.
func (s *Server) deleteImportData(a *appRequest, e scheduler.Entry) bool {
	ctx := a.r.Context()
	im := e.Import
	fail := func(step string, err error) bool {
		s.log.Error("deleting an import's data", "project", a.project, "import", im.ID, "step", step, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, fmt.Sprintf("the data of import %s could not be deleted (%s); the import is paused and was not deleted: retry the DELETE", im.ID, step))
		return false
	}
	// Paused first and durably, so no run starts while its data goes.
	if !im.Paused {
		paused := true
		if _, err := s.sched.Catalog().Patch(ctx, a.project, im.ID, &paused, nil); err != nil {
			return fail("pausing the import", err)
		}
	}
	// A run already going would write after the deletion.
	runs, err := s.store.Runs(ctx, store.RunFilter{Project: a.project, Import: im.ID, Limit: 5})
	if err != nil {
		return fail("reading its runs", err)
	}
	for _, r := range runs {
		if r.Status == store.RunRunning {
			api.AppError(a.w, http.StatusConflict, fmt.Sprintf("run %s of import %s is still running; the import is paused now: retry the DELETE once the run has ended", r.ID, im.ID))
			return false
		}
	}
	var events int64
	var profiles int
	switch im.ImportType {
	case importspec.EventStream:
		if events, err = s.store.DeleteImportEvents(ctx, a.project, im.ID); err != nil {
			return fail("deleting its events", err)
		}
	case importspec.People, importspec.Groups:
		if profiles, err = run.ReleaseProfiles(ctx, s.store, a.project, im.ID); err != nil {
			return fail("unsetting its profile properties", err)
		}
	}
	// Should the import come back under the same id, it starts from the
	// beginning rather than past rows whose records are gone.
	reset := store.Batch{Project: a.project, Checkpoint: &store.Checkpoint{Import: im.ID}}
	if _, err := s.store.Write(ctx, []store.Batch{reset}); err != nil {
		return fail("resetting its checkpoint", err)
	}
	s.log.Info("import data deleted", "project", a.project, "import", im.ID, "events", events, "profiles", profiles, "by", a.p.Account)
	return true
}
