package appapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/scheduler"
)

// Warehouse connections through the app API (docs/security.md): anyone
// with read access lists the connections their project may name; only an
// owner creates (a Postgres server the operator allows, its password
// sealed at rest, never shown again) or deletes one.

const connectionsPath = "/api/app/projects/{project_id}/warehouse-sources/connections"

func (s *Server) handleConnectionList(a *appRequest) {
	api.AppOK(a.w, s.sched.Catalog().Connections(a.project))
}

// ownerOnly answers 403 unless the account owns the project.
func ownerOnly(a *appRequest) bool {
	if a.p.Role != config.RoleOwner {
		api.AppError(a.w, http.StatusForbidden, fmt.Sprintf("service account %q has role %s in project %d; connections need owner", a.p.Account, a.p.Role, a.project))
		return false
	}
	return true
}

func (s *Server) handleConnectionCreate(a *appRequest) {
	if !ownerOnly(a) {
		return
	}
	_, body, ok := readJSONObject(a, 64<<10)
	if !ok {
		return
	}
	v, err := s.sched.Catalog().CreateConnection(a.r.Context(), a.project, body, a.p.Account)
	switch {
	case errors.Is(err, scheduler.ErrNotEnabled):
		api.AppError(a.w, http.StatusForbidden, err.Error())
	case errors.Is(err, scheduler.ErrInvalid):
		api.AppError(a.w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.log.Error("creating a connection", "project", a.project, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the connection could not be saved")
	default:
		s.log.Info("connection created", "project", a.project, "connection", v.ID, "by", a.p.Account)
		api.AppOK(a.w, v)
	}
}

func (s *Server) handleConnectionDelete(a *appRequest) {
	if !ownerOnly(a) {
		return
	}
	if _, _, ok := readJSONObject(a, 64<<10); !ok {
		return
	}
	id := a.r.PathValue("connection_id")
	err := s.sched.Catalog().DeleteConnection(a.r.Context(), a.project, id)
	switch {
	case errors.Is(err, scheduler.ErrNotFound):
		api.AppError(a.w, http.StatusNotFound, err.Error())
	case errors.Is(err, scheduler.ErrInUse):
		api.AppError(a.w, http.StatusConflict, err.Error())
	case errors.Is(err, scheduler.ErrInvalid):
		api.AppError(a.w, http.StatusForbidden, err.Error())
	case err != nil:
		s.log.Error("deleting a connection", "project", a.project, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the connection could not be deleted")
	default:
		s.log.Info("connection deleted", "project", a.project, "connection", id, "by", a.p.Account)
		api.AppOK(a.w, nil)
	}
}
