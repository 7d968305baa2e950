package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tributary-dev/tributary/ingest/auth"
)

// The app API ({app_url}/api/app/…) shares its authorization and error
// shapes with the layers above: the import routes live with the scheduler
// (scheduler/appapi) and mount on this server's mux through Handler, so
// they answer with the same bodies, the same catch-all 404 and the same
// request metric. Service-account Basic auth only; owner/admin for writes;
// errors are {"error","status":"error"}, as the public API answers them.

// RouteFunc mounts an instrumented handler: pattern as http.ServeMux takes
// it, name as the route label of tributary_http_requests_total.
type RouteFunc func(pattern, name string, h http.HandlerFunc)

var appAuth = auth.Allowed{ServiceAccount: true, Session: true}

// AppError answers an app API error: {"error":msg,"status":"error"}.
func AppError(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="tributary"`)
	}
	writeJSON(w, status, map[string]string{"error": msg, "status": "error"})
}

// AppOK answers {"status":"ok"}, with "results" unless results is nil.
func AppOK(w http.ResponseWriter, results any) {
	body := map[string]any{"status": "ok"}
	if results != nil {
		body["results"] = results
	}
	writeJSON(w, http.StatusOK, body)
}

// AppAuthorize authenticates an app API request against the project in
// its path ({project_id}), checks the role for writes and the project's
// residency. On failure it has answered and ok is false.
func (s *Server) AppAuthorize(w http.ResponseWriter, r *http.Request, write bool) (p auth.Principal, project int64, ok bool) {
	project, err := strconv.ParseInt(r.PathValue("project_id"), 10, 64)
	if err != nil || project <= 0 {
		AppError(w, http.StatusNotFound, fmt.Sprintf("no project %q: project ids are positive integers", r.PathValue("project_id")))
		return p, 0, false
	}
	if write && crossSiteBrowser(r) {
		AppError(w, http.StatusForbidden, crossSiteWriteMsg)
		return p, 0, false
	}
	p, err = s.auth.RequestFor(r, appAuth, project)
	if err != nil {
		switch {
		case errors.Is(err, auth.ErrUnavailable):
			// The cause is the store's (logged); the client only learns to retry.
			s.log.Warn("authentication unavailable", "err", err)
			AppError(w, http.StatusServiceUnavailable, "credentials cannot be checked now; retry")
		case errors.Is(err, auth.ErrUnauthorized):
			AppError(w, http.StatusUnauthorized, err.Error())
		default:
			AppError(w, http.StatusForbidden, err.Error())
		}
		return p, 0, false
	}
	if write && !p.CanWrite() {
		AppError(w, http.StatusForbidden, fmt.Sprintf("service account %q has role %s in project %d; this needs owner or admin", p.Account, p.Role, project))
		return p, 0, false
	}
	if p.Project.Region != s.cfg.Region {
		AppError(w, http.StatusForbidden, residencyMessage(p.Project, s.cfg.Region))
		return p, 0, false
	}
	return p, project, true
}
