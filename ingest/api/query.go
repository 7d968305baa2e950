package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/where"
)

// The read (query) APIs: profile query (/api/2.0/engage), segmentation and
// the event-name list. They are read-only, so every role may call them,
// with the same credentials as raw export.
var queryAuth = auth.Allowed{Secret: true, ServiceAccount: true, OAuth: true, Session: true}

// maxQueryForm bounds a form-encoded query body: a distinct_ids list of a
// few thousand ids fits many times over.
const maxQueryForm = 10 << 20

// queryRoutes registers the query endpoints under both prefixes clients
// use: /api/2.0/… (the older paths, still what most libraries call) and
// /api/query/… (the paths of the public Query API document).
func (s *Server) queryRoutes(route func(pattern, name string, h http.HandlerFunc)) {
	for _, prefix := range []string{"/api/2.0", "/api/query"} {
		route(prefix+"/engage", "query_engage", s.handleEngageQuery)
		route(prefix+"/segmentation", "query_segmentation", s.handleSegmentation)
		route(prefix+"/events/names", "query_event_names", s.handleEventNames)
	}
}

// queryParams authorizes a query request and returns its parameters: the
// query string merged with a form-encoded body. On failure it has already
// answered.
func (s *Server) queryParams(w http.ResponseWriter, r *http.Request, methods ...string) (auth.Principal, url.Values, bool) {
	allowed := false
	for _, m := range methods {
		allowed = allowed || r.Method == m
	}
	if !allowed {
		writeError(w, http.StatusMethodNotAllowed, "use "+strings.Join(methods, " or "))
		return auth.Principal{}, nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxQueryForm)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("form body larger than %d bytes", maxQueryForm))
			return auth.Principal{}, nil, false
		}
		writeError(w, http.StatusBadRequest, "invalid form body: "+err.Error())
		return auth.Principal{}, nil, false
	}
	// Python and shell clients of the engage API send project_id in the
	// form body; authentication reads it from the query string.
	if q := r.URL.Query(); !q.Has("project_id") && r.PostForm.Get("project_id") != "" {
		q.Set("project_id", r.PostForm.Get("project_id"))
		r.URL.RawQuery = q.Encode()
	}
	p, ok := s.authorize(w, r, queryAuth, false)
	return p, r.Form, ok
}

// parseWhere compiles a filter parameter. A syntax error names its byte
// position, so the 400 points at the mistake.
func parseWhere(param, src string) (*where.Expr, error) {
	e, err := where.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("invalid %s expression: %w", param, err)
	}
	return e, nil
}

// answerReadError maps a store or enrichment failure to a response; a
// request the client abandoned gets no log line.
func (s *Server) answerReadError(w http.ResponseWriter, r *http.Request, what string, project int64, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		return
	}
	s.log.Error(what+" failed", "project", project, "err", err)
	writeError(w, http.StatusInternalServerError, what+" failed")
}

// positiveInt reads an optional integer parameter in [1, max].
func positiveInt(q url.Values, name string, def, max int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("%s must be an integer from 1 to %d, got %q", name, max, v)
	}
	return n, nil
}

const dayMs = int64(24 * time.Hour / time.Millisecond)

// scanDays runs q over [fromMs, toMs) one UTC day at a time, so the store's
// ordered scan never sorts more than a day of events, whatever the range.
func scanDays(ctx context.Context, st store.Store, q store.Scan, fromMs, toMs int64, fn func(*store.Event) error) error {
	for start := fromMs; start < toMs; {
		end := (start/dayMs + 1) * dayMs // the next UTC midnight
		if start < 0 && start%dayMs != 0 {
			end = (start / dayMs) * dayMs
		}
		end = min(end, toMs)
		q.FromMs, q.ToMs = start, end
		if err := st.ScanEvents(ctx, q, fn); err != nil {
			return fmt.Errorf("scan %s: %w", time.UnixMilli(start).UTC().Format(time.DateOnly), err)
		}
		start = end
	}
	return nil
}
