// Package appapi serves the app API's warehouse-import routes
// ({app_url}/api/app/projects/{project_id}/warehouse-sources/…): imports,
// manual syncs, their history, the deletion of an import's data, and
// connections. It is the scheduler's HTTP face, as ingest/api is the
// ingestion core's, and lives with what it drives so that the ingestion
// core imports nothing of the sync engine. Its routes mount on the ingest
// API's mux (api.Server.Handler), whose authorization and error shapes
// they share.
package appapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// Authorizer checks an app API request: the ingest API's
// (*api.Server).AppAuthorize, so every app route answers auth failures
// with the same bodies and codes. On failure it has answered.
type Authorizer interface {
	AppAuthorize(w http.ResponseWriter, r *http.Request, write bool) (p auth.Principal, project int64, ok bool)
}

// Scheduler is what the routes drive: the import catalog, manual runs and
// the live figures of a run going (*scheduler.Scheduler).
type Scheduler interface {
	Catalog() *scheduler.Catalog
	Trigger(ctx context.Context, project int64, id, trigger string, full bool) (store.Run, bool, error)
	Progress(runID string) (run.Stats, bool)
}

// Deps are what the app API needs from the server assembly.
type Deps struct {
	Auth Authorizer
	// Scheduler runs warehouse imports; nil: every route answers 503.
	Scheduler Scheduler
	// Store reads run history and deletes an import's data.
	Store  store.Store
	Logger *slog.Logger // nil: slog.Default()
}

// Server holds the app API handlers' shared state.
type Server struct {
	auth  Authorizer
	sched Scheduler
	store store.Store
	log   *slog.Logger
}

// New builds the app API.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Server{auth: d.Auth, sched: d.Scheduler, store: d.Store, log: d.Logger}
}

const importsPath = "/api/app/projects/{project_id}/warehouse-sources/imports"

// Routes mounts the app API's routes; pass it to (*api.Server).Handler.
func (s *Server) Routes(route api.RouteFunc) {
	route("GET "+importsPath, "app_imports", s.appHandler(false, s.handleImportList))
	route("GET "+importsPath+"/{import_id}", "app_import", s.appHandler(false, s.handleImportGet))
	route("PATCH "+importsPath+"/{import_id}", "app_import_patch", s.appHandler(true, s.handleImportPatch))
	route("DELETE "+importsPath+"/{import_id}", "app_import_delete", s.appHandler(true, s.handleImportDelete))
	route("POST "+importsPath+"/{kind}", "app_import_create", s.appHandler(true, s.handleImportCreate))
	route("PUT "+importsPath+"/{import_id}/manual-sync", "app_manual_sync", s.appHandler(true, s.handleManualSync))
	route("GET "+importsPath+"/{import_id}/history", "app_import_history", s.appHandler(false, s.handleImportHistory))
	route("GET "+importsPath+"/{import_id}/preview", "app_import_preview", s.appHandler(false, s.handleImportPreview))
	s.ledgerRoutes(route)
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

// appHandler runs h for an authorized request on a server with
// warehouse imports.
func (s *Server) appHandler(write bool, h func(*appRequest)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, project, ok := s.auth.AppAuthorize(w, r, write)
		if !ok {
			return
		}
		if s.sched == nil {
			api.AppError(w, http.StatusServiceUnavailable, "warehouse imports are not enabled on this server")
			return
		}
		h(&appRequest{w: w, r: r, p: p, project: project})
	}
}

// entry finds the path's import or answers 404.
func (s *Server) entry(a *appRequest) (scheduler.Entry, bool) {
	id := a.r.PathValue("import_id")
	e, ok := s.sched.Catalog().Get(a.project, id)
	if !ok {
		api.AppError(a.w, http.StatusNotFound, fmt.Sprintf("no import %q in project %d", id, a.project))
	}
	return e, ok
}

// readJSONObject reads an optional JSON object body (empty = {}).
func readJSONObject(a *appRequest, limit int64) (map[string]json.RawMessage, []byte, bool) {
	body, err := io.ReadAll(io.LimitReader(a.r.Body, limit+1))
	if err != nil {
		api.AppError(a.w, http.StatusBadRequest, "reading the body: "+err.Error())
		return nil, nil, false
	}
	if int64(len(body)) > limit {
		api.AppError(a.w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", limit))
		return nil, nil, false
	}
	fields := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) == 0 {
		return fields, []byte("{}"), true
	}
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		api.AppError(a.w, http.StatusBadRequest, "the body must be a JSON object")
		return nil, nil, false
	}
	return fields, body, true
}
