package appapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

func (s *Server) handleImportList(a *appRequest) {
	entries := s.sched.Catalog().List(a.project)
	out := make([]importView, 0, len(entries))
	for _, e := range entries {
		out = append(out, s.view(a, e, false))
	}
	api.AppOK(a.w, out)
}

func (s *Server) handleImportGet(a *appRequest) {
	if e, ok := s.entry(a); ok {
		api.AppOK(a.w, s.view(a, e, true))
	}
}

var importKinds = map[string]string{"event-stream": "event_stream", "people": "people", "groups": "groups", "lookup-table": "lookup_table"}

func (s *Server) handleImportCreate(a *appRequest) {
	typ, ok := importKinds[a.r.PathValue("kind")]
	if !ok {
		api.AppError(a.w, http.StatusNotFound, fmt.Sprintf("no such import kind %q: use event-stream, people, groups or lookup-table", a.r.PathValue("kind")))
		return
	}
	_, body, ok := readJSONObject(a, 1<<20)
	if !ok {
		return
	}
	e, err := s.sched.Catalog().Create(a.r.Context(), a.project, typ, body, a.p.Account)
	switch {
	case errors.Is(err, scheduler.ErrInvalid):
		api.AppError(a.w, http.StatusBadRequest, err.Error())
	case errors.Is(err, scheduler.ErrExists):
		api.AppError(a.w, http.StatusConflict, err.Error())
	case err != nil:
		s.log.Error("creating an import", "project", a.project, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the import could not be saved")
	default:
		s.log.Info("import created", "project", a.project, "import", e.Import.ID, "by", a.p.Account)
		api.AppOK(a.w, s.view(a, e, true))
	}
}

func (s *Server) handleImportPatch(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	fields, _, ok := readJSONObject(a, 64<<10)
	if !ok {
		return
	}
	var paused *bool
	var schedule *string
	for k, raw := range fields {
		switch k {
		case "paused":
			var b bool
			if json.Unmarshal(raw, &b) != nil {
				api.AppError(a.w, http.StatusBadRequest, "paused: must be true or false")
				return
			}
			paused = &b
		case "run_every", "schedule":
			if schedule != nil {
				api.AppError(a.w, http.StatusBadRequest, "give run_every or schedule, not both")
				return
			}
			sc, err := patchSchedule(k, raw)
			if err != nil {
				api.AppError(a.w, http.StatusBadRequest, err.Error())
				return
			}
			schedule = &sc
		case "databricks_params":
			// Accepted and ignored: there are no Databricks sources.
		default:
			api.AppError(a.w, http.StatusBadRequest, fmt.Sprintf("%s: not a field PATCH can change (paused, run_every, schedule)", k))
			return
		}
	}
	if paused == nil && schedule == nil {
		api.AppError(a.w, http.StatusBadRequest, "nothing to change: give paused, run_every or schedule")
		return
	}
	e, err := s.sched.Catalog().Patch(a.r.Context(), a.project, e.Import.ID, paused, schedule)
	switch {
	case errors.Is(err, scheduler.ErrInvalid):
		api.AppError(a.w, http.StatusBadRequest, err.Error())
	case errors.Is(err, scheduler.ErrNotFound):
		api.AppError(a.w, http.StatusNotFound, err.Error())
	case err != nil:
		s.log.Error("changing an import", "project", a.project, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the change could not be saved")
	default:
		api.AppOK(a.w, s.view(a, e, true))
	}
}

func patchSchedule(k string, raw json.RawMessage) (string, error) {
	if k == "schedule" {
		var sc string
		if json.Unmarshal(raw, &sc) != nil {
			return "", errors.New("schedule: must be a string (cron expression, @hourly, @daily, @weekly or api)")
		}
		return sc, nil
	}
	var ns int64
	if json.Unmarshal(raw, &ns) != nil {
		return "", errors.New("run_every: must be an integer number of nanoseconds")
	}
	for _, sc := range []string{"api", "@hourly", "@daily", "@weekly"} {
		if v, _ := scheduler.RunEvery(sc); v == ns {
			return sc, nil
		}
	}
	return "", fmt.Errorf("run_every: %d is not one of 0 (API only), 3600000000000 (hourly), 86400000000000 (daily), 604800000000000 (weekly)", ns)
}

func (s *Server) handleImportDelete(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	fields, _, ok := readJSONObject(a, 64<<10)
	if !ok {
		return
	}
	if raw, ok := fields["delete_data"]; ok {
		var del bool
		if json.Unmarshal(raw, &del) != nil {
			api.AppError(a.w, http.StatusBadRequest, "delete_data: must be true or false")
			return
		}
		if del && !s.deleteImportData(a, e) {
			return
		}
	}
	if !s.forgetMirror(a, e) {
		return
	}
	if _, err := s.sched.Catalog().Delete(a.r.Context(), a.project, e.Import.ID); err != nil {
		s.log.Error("deleting an import", "project", a.project, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the import could not be deleted")
		return
	}
	s.log.Info("import deleted", "project", a.project, "import", e.Import.ID, "by", a.p.Account)
	api.AppOK(a.w, nil)
}

func (s *Server) handleManualSync(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	if _, _, ok := readJSONObject(a, 64<<10); !ok {
		return
	}
	r, started, err := s.sched.Trigger(a.r.Context(), a.project, e.Import.ID, scheduler.TriggerAPI, false)
	switch {
	case errors.Is(err, store.ErrRunLimit):
		api.AppError(a.w, http.StatusTooManyRequests, "at most 5 API-triggered syncs per import per hour; try again later")
	case errors.Is(err, scheduler.ErrPaused), errors.Is(err, run.ErrComplete):
		api.AppError(a.w, http.StatusConflict, err.Error())
	case errors.Is(err, scheduler.ErrNotFound):
		api.AppError(a.w, http.StatusNotFound, err.Error())
	case errors.Is(err, scheduler.ErrStopping):
		api.AppError(a.w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		s.log.Error("manual sync", "project", a.project, "import", e.Import.ID, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the sync could not be started")
	default:
		if started {
			s.log.Info("manual sync started", "project", a.project, "import", e.Import.ID, "run", r.ID, "by", a.p.Account)
		}
		api.AppOK(a.w, map[string]string{"run_id": r.ID})
	}
}

func (s *Server) handleImportHistory(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	limit := 30
	if v := a.r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			api.AppError(a.w, http.StatusBadRequest, "limit: must be an integer from 1 to 1000")
			return
		}
		limit = n
	}
	runs, err := s.store.Runs(a.r.Context(), store.RunFilter{Project: a.project, Import: e.Import.ID, Limit: limit})
	if err != nil {
		s.log.Error("reading sync history", "project", a.project, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the history could not be read")
		return
	}
	out := make([]runView, len(runs))
	for i, r := range runs {
		out[i] = s.runView(r)
	}
	s.addMirrorCounts(a.r.Context(), a.project, runs, out)
	api.AppOK(a.w, map[string]any{"runs": out})
}

// millisToSeconds is the public API's integer time (seconds).
func millisToSeconds(ms int64) int64 { return time.UnixMilli(ms).Unix() }
