package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// The app API ({app_url}/api/app/…): warehouse imports, manual syncs and
// their history. Service-account Basic auth only; owner/admin for writes;
// errors are {"error","status":"error"}, as the public API answers them.

var appAuth = auth.Allowed{ServiceAccount: true}

const importsPath = "/api/app/projects/{project_id}/warehouse-sources/imports"

func (s *Server) appRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	route("GET "+importsPath, "app_imports", s.appHandler(false, s.handleImportList))
	route("GET "+importsPath+"/{import_id}", "app_import", s.appHandler(false, s.handleImportGet))
	route("PATCH "+importsPath+"/{import_id}", "app_import_patch", s.appHandler(true, s.handleImportPatch))
	route("DELETE "+importsPath+"/{import_id}", "app_import_delete", s.appHandler(true, s.handleImportDelete))
	route("POST "+importsPath+"/{kind}", "app_import_create", s.appHandler(true, s.handleImportCreate))
	route("PUT "+importsPath+"/{import_id}/manual-sync", "app_manual_sync", s.appHandler(true, s.handleManualSync))
	route("GET "+importsPath+"/{import_id}/history", "app_import_history", s.appHandler(false, s.handleImportHistory))
	route("GET "+connectionsPath, "app_connections", s.appHandler(false, s.handleConnectionList))
	route("POST "+connectionsPath, "app_connection_create", s.appHandler(true, s.handleConnectionCreate))
	route("DELETE "+connectionsPath+"/{connection_id}", "app_connection_delete", s.appHandler(true, s.handleConnectionDelete))
}

type appRequest struct {
	w       http.ResponseWriter
	r       *http.Request
	p       auth.Principal
	project int64
}

func appError(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="tributary"`)
	}
	writeJSON(w, status, map[string]string{"error": msg, "status": "error"})
}

func appOK(w http.ResponseWriter, results any) {
	body := map[string]any{"status": "ok"}
	if results != nil {
		body["results"] = results
	}
	writeJSON(w, http.StatusOK, body)
}

// appHandler runs h for an authorized request (appPrincipal) on a server
// with warehouse imports.
func (s *Server) appHandler(write bool, h func(*appRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.appPrincipal(w, r, write)
		if !ok {
			return
		}
		if s.sched == nil {
			appError(w, http.StatusServiceUnavailable, "warehouse imports are not enabled on this server")
			return
		}
		h(a)
	}
}

// appPrincipal authenticates against the project in the path, checks the
// role for writes and the project's residency. On failure it has answered.
func (s *Server) appPrincipal(w http.ResponseWriter, r *http.Request, write bool) (*appRequest, bool) {
	project, err := strconv.ParseInt(r.PathValue("project_id"), 10, 64)
	if err != nil || project <= 0 {
		appError(w, http.StatusNotFound, fmt.Sprintf("no project %q: project ids are positive integers", r.PathValue("project_id")))
		return nil, false
	}
	p, err := s.auth.RequestFor(r, appAuth, project)
	if err != nil {
		switch {
		case errors.Is(err, auth.ErrUnavailable):
			// The cause is the store's (logged); the client only learns to retry.
			s.log.Warn("authentication unavailable", "err", err)
			appError(w, http.StatusServiceUnavailable, "credentials cannot be checked now; retry")
		case errors.Is(err, auth.ErrUnauthorized):
			appError(w, http.StatusUnauthorized, err.Error())
		default:
			appError(w, http.StatusForbidden, err.Error())
		}
		return nil, false
	}
	if write && !p.CanWrite() {
		appError(w, http.StatusForbidden, fmt.Sprintf("service account %q has role %s in project %d; this needs owner or admin", p.Account, p.Role, project))
		return nil, false
	}
	if p.Project.Region != s.cfg.Region {
		appError(w, http.StatusForbidden, residencyMessage(p.Project, s.cfg.Region))
		return nil, false
	}
	return &appRequest{w: w, r: r, p: p, project: project}, true
}

// entry finds the path's import or answers 404.
func (s *Server) entry(a *appRequest) (scheduler.Entry, bool) {
	id := a.r.PathValue("import_id")
	e, ok := s.sched.Catalog().Get(a.project, id)
	if !ok {
		appError(a.w, http.StatusNotFound, fmt.Sprintf("no import %q in project %d", id, a.project))
	}
	return e, ok
}

// readJSONObject reads an optional JSON object body (empty = {}).
func readJSONObject(a *appRequest, limit int64) (map[string]json.RawMessage, []byte, bool) {
	body, err := io.ReadAll(io.LimitReader(a.r.Body, limit+1))
	if err != nil {
		appError(a.w, http.StatusBadRequest, "reading the body: "+err.Error())
		return nil, nil, false
	}
	if int64(len(body)) > limit {
		appError(a.w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", limit))
		return nil, nil, false
	}
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) == 0 {
		return fields, []byte("{}"), true
	}
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		appError(a.w, http.StatusBadRequest, "the body must be a JSON object")
		return nil, nil, false
	}
	return fields, body, true
}

func (s *Server) handleImportList(a *appRequest) {
	entries := s.sched.Catalog().List(a.project)
	out := make([]importView, 0, len(entries))
	for _, e := range entries {
		out = append(out, s.view(a, e, false))
	}
	appOK(a.w, out)
}

func (s *Server) handleImportGet(a *appRequest) {
	if e, ok := s.entry(a); ok {
		appOK(a.w, s.view(a, e, true))
	}
}

var importKinds = map[string]string{"event-stream": "event_stream", "people": "people", "groups": "groups", "lookup-table": "lookup_table"}

func (s *Server) handleImportCreate(a *appRequest) {
	typ, ok := importKinds[a.r.PathValue("kind")]
	if !ok {
		appError(a.w, http.StatusNotFound, fmt.Sprintf("no such import kind %q: use event-stream, people, groups or lookup-table", a.r.PathValue("kind")))
		return
	}
	_, body, ok := readJSONObject(a, 1<<20)
	if !ok {
		return
	}
	e, err := s.sched.Catalog().Create(a.r.Context(), a.project, typ, body, a.p.Account)
	switch {
	case errors.Is(err, scheduler.ErrInvalid):
		appError(a.w, http.StatusBadRequest, err.Error())
	case errors.Is(err, scheduler.ErrExists):
		appError(a.w, http.StatusConflict, err.Error())
	case err != nil:
		s.log.Error("creating an import", "project", a.project, "err", err)
		appError(a.w, http.StatusInternalServerError, "the import could not be saved")
	default:
		s.log.Info("import created", "project", a.project, "import", e.Import.ID, "by", a.p.Account)
		appOK(a.w, s.view(a, e, true))
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
				appError(a.w, http.StatusBadRequest, "paused: must be true or false")
				return
			}
			paused = &b
		case "run_every", "schedule":
			if schedule != nil {
				appError(a.w, http.StatusBadRequest, "give run_every or schedule, not both")
				return
			}
			sc, err := patchSchedule(k, raw)
			if err != nil {
				appError(a.w, http.StatusBadRequest, err.Error())
				return
			}
			schedule = &sc
		case "databricks_params":
			// Accepted and ignored: there are no Databricks sources.
		default:
			appError(a.w, http.StatusBadRequest, fmt.Sprintf("%s: not a field PATCH can change (paused, run_every, schedule)", k))
			return
		}
	}
	if paused == nil && schedule == nil {
		appError(a.w, http.StatusBadRequest, "nothing to change: give paused, run_every or schedule")
		return
	}
	e, err := s.sched.Catalog().Patch(a.r.Context(), a.project, e.Import.ID, paused, schedule)
	switch {
	case errors.Is(err, scheduler.ErrInvalid):
		appError(a.w, http.StatusBadRequest, err.Error())
	case errors.Is(err, scheduler.ErrNotFound):
		appError(a.w, http.StatusNotFound, err.Error())
	case err != nil:
		s.log.Error("changing an import", "project", a.project, "err", err)
		appError(a.w, http.StatusInternalServerError, "the change could not be saved")
	default:
		appOK(a.w, s.view(a, e, true))
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
			appError(a.w, http.StatusBadRequest, "delete_data: must be true or false")
			return
		}
		if del && !s.deleteImportData(a, e) {
			return
		}
	}
	if _, err := s.sched.Catalog().Delete(a.r.Context(), a.project, e.Import.ID); err != nil {
		s.log.Error("deleting an import", "project", a.project, "err", err)
		appError(a.w, http.StatusInternalServerError, "the import could not be deleted")
		return
	}
	s.log.Info("import deleted", "project", a.project, "import", e.Import.ID, "by", a.p.Account)
	appOK(a.w, nil)
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
		appError(a.w, http.StatusTooManyRequests, "at most 5 API-triggered syncs per import per hour; try again later")
	case errors.Is(err, scheduler.ErrPaused), errors.Is(err, run.ErrComplete):
		appError(a.w, http.StatusConflict, err.Error())
	case errors.Is(err, scheduler.ErrNotFound):
		appError(a.w, http.StatusNotFound, err.Error())
	case errors.Is(err, scheduler.ErrStopping):
		appError(a.w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		s.log.Error("manual sync", "project", a.project, "import", e.Import.ID, "err", err)
		appError(a.w, http.StatusInternalServerError, "the sync could not be started")
	default:
		if started {
			s.log.Info("manual sync started", "project", a.project, "import", e.Import.ID, "run", r.ID, "by", a.p.Account)
		}
		appOK(a.w, map[string]string{"run_id": r.ID})
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
			appError(a.w, http.StatusBadRequest, "limit: must be an integer from 1 to 1000")
			return
		}
		limit = n
	}
	runs, err := s.store.Runs(a.r.Context(), store.RunFilter{Project: a.project, Import: e.Import.ID, Limit: limit})
	if err != nil {
		s.log.Error("reading sync history", "project", a.project, "err", err)
		appError(a.w, http.StatusInternalServerError, "the history could not be read")
		return
	}
	out := make([]runView, len(runs))
	for i, r := range runs {
		out[i] = s.runView(r)
	}
	appOK(a.w, map[string]any{"runs": out})
}

// millisToSeconds is the public API's integer time (seconds).
func millisToSeconds(ms int64) int64 { return time.UnixMilli(ms).Unix() }
