package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/config"
)

// CORS is offered only on the token endpoints (/track, /engage, /groups):
// their requests carry nothing a page could steal, just the public project
// token. Endpoints that take a secret or a service account never answer
// with CORS headers, so no browser page can read what they return.
//
// mixpanel-browser sends every XHR withCredentials, so the answer must
// echo the Origin (never "*") and add Access-Control-Allow-Credentials.

// corsPolicy says which origins get CORS headers before the request's
// project is known (a preflight names none): every origin when some
// project leaves cors_allowed_origins out, else the union of the lists.
// Once the records name their projects, records of a project whose list
// leaves the origin out are refused (originRefusal).
type corsPolicy struct {
	any     bool
	origins map[string]bool
}

func newCORSPolicy(projects []config.Project) corsPolicy {
	c := corsPolicy{origins: map[string]bool{}}
	for i := range projects {
		if projects[i].CORSAllowedOrigins == nil {
			c.any = true
		}
		for _, o := range projects[i].CORSAllowedOrigins {
			c.origins[o] = true
		}
	}
	return c
}

func (c corsPolicy) allows(origin string) bool {
	return c.any || c.origins[strings.ToLower(origin)]
}

// corsMethods and corsDefaultHeaders answer a preflight. mixpanel-js posts
// form data, which needs no preflight; a JSON body (Content-Type:
// application/json), gzip or the SDK's xhr_headers option does.
const (
	corsMethods        = "GET, POST, OPTIONS"
	corsDefaultHeaders = "Content-Type, Content-Encoding, X-Requested-With"
	corsMaxAge         = "86400" // browsers cap it lower (Chrome: 2 hours)
)

// cors wraps a token endpoint: it adds the CORS headers for allowed
// origins and answers preflight OPTIONS itself.
func (s *Server) cors(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		origin := r.Header.Get("Origin")
		allowed := false
		switch {
		case origin == "":
			// Not a cross-origin browser request; "*" has always been
			// answered here and costs nothing without credentials.
			hdr.Set("Access-Control-Allow-Origin", "*")
		case s.corsPolicy.allows(origin):
			allowed = true
			hdr.Set("Access-Control-Allow-Origin", origin)
			hdr.Set("Access-Control-Allow-Credentials", "true")
		}
		hdr.Add("Vary", "Origin")
		if r.Method != http.MethodOptions {
			h(w, r)
			return
		}
		hdr.Add("Vary", "Access-Control-Request-Method")
		hdr.Add("Vary", "Access-Control-Request-Headers")
		if allowed || origin == "" {
			hdr.Set("Access-Control-Allow-Methods", corsMethods)
			hdr.Set("Access-Control-Allow-Headers", preflightHeaders(r.Header.Get("Access-Control-Request-Headers")))
			hdr.Set("Access-Control-Max-Age", corsMaxAge)
			// Chrome asks before a public page may call a server on a
			// private network, a common home for a self-hosted server.
			if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
				hdr.Set("Access-Control-Allow-Private-Network", "true")
			}
		}
		hdr.Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	}
}

// preflightHeaders allows the headers the SDKs send and any other a
// preflight asks for (the SDK's xhr_headers option may add any), except
// credentials: a secret has no business in a browser, so Authorization is
// never allowed cross-origin.
func preflightHeaders(requested string) string {
	out := corsDefaultHeaders
	for _, h := range strings.Split(requested, ",") {
		h = strings.TrimSpace(h)
		if h == "" || !isToken(h) || strings.EqualFold(h, "Authorization") || strings.EqualFold(h, "Cookie") ||
			slices.ContainsFunc(strings.Split(out, ", "), func(a string) bool { return strings.EqualFold(a, h) }) {
			continue
		}
		out += ", " + h
	}
	return out
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2), so an
// echoed header list cannot smuggle anything into the answer.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// originRefusal is the reason a browser page's request may not send the
// project's data ("" when it may): the project lists its origins
// (cors_allowed_origins) and this one is not among them.
func originRefusal(r *http.Request, p *config.Project) string {
	o := r.Header.Get("Origin")
	if o == "" || p.AllowsOrigin(o) {
		return ""
	}
	return "project " + strconv.FormatInt(p.ID, 10) + " does not accept browser requests from origin " + strconv.Quote(o) + " (cors_allowed_origins)"
}

// refuseOrigins turns the records of the parts (a request's records or
// updates, by project) whose project does not admit the request's browser
// origin (cors_allowed_origins) into failures, written by fail: a form
// post needs no preflight, so the browser sends it whatever the answer's
// headers, and the refusal has to happen here. When no part is left the
// CORS headers are withdrawn too.
func refuseOrigins[T any](w http.ResponseWriter, r *http.Request, parts []T, fails []record.Failure,
	project func(T) *config.Project, fail func(T, []record.Failure, string) []record.Failure) ([]T, []record.Failure) {
	if r.Header.Get("Origin") == "" || len(parts) == 0 {
		return parts, fails
	}
	if !slices.ContainsFunc(parts, func(p T) bool { return originRefusal(r, project(p)) != "" }) {
		return parts, fails // the common case: no project restricts origins
	}
	kept := parts[:0:0]
	for _, p := range parts {
		if msg := originRefusal(r, project(p)); msg != "" {
			fails = fail(p, fails, msg)
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == 0 {
		withdrawCORS(w)
	}
	return kept, fails
}

// withdrawCORS removes the CORS headers when every project a request
// named refuses its origin, so the browser hides the answer as it would
// for a page the projects never admitted.
func withdrawCORS(w http.ResponseWriter) {
	w.Header().Del("Access-Control-Allow-Origin")
	w.Header().Del("Access-Control-Allow-Credentials")
}
