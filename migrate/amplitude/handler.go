package amplitude

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
)

// maxRequestBytes bounds a POST /amplitude body: a few short strings.
const maxRequestBytes = 64 << 10

// Handler serves the migration API, to be mounted at the root of the
// migrate listener (by default the main server):
//
//	POST /amplitude            start (202) or dry-run (200) a migration
//	GET  /amplitude?project_id=N  the project's jobs (list.go)
//	GET  /amplitude/{job_id}   a job's status
//
// Errors are {"code","error","status"} as on the rest of the API.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/amplitude", s.handleSubmit)
	mux.HandleFunc("/amplitude/{job_id}", s.handleStatus)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

type errorBody struct {
	Code   int    `json:"code"`
	Error  string `json:"error"`
	Status string `json:"status"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only this package's own types are passed in
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Code: status, Error: msg, Status: http.StatusText(status)})
}

func (s *Service) handleSubmit(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.handleList(w, r) // list.go
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "use POST /amplitude with a JSON body")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "the body is over 64 KB")
			return
		}
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	req, err := ParseRequest(body)
	if err != nil {
		s.refused(w, r, err)
		return
	}
	if req.DryRun {
		// Synchronous: the answer is the count. A client that gives up
		// cancels the export through the request's context.
		res, err := s.DryRun(r.Context(), req, nil)
		if err != nil {
			s.refused(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	st, err := s.Submit(r.Context(), req)
	if err != nil {
		s.refused(w, r, err)
		return
	}
	w.Header().Set("Location", st.StatusURL)
	writeJSON(w, http.StatusAccepted, st)
}

func (s *Service) handleStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "use GET /amplitude/{job_id}")
		return
	}
	id := r.PathValue("job_id")
	st, err := s.Status(r.Context(), id)
	found := err == nil
	if err != nil && !errors.Is(err, ErrJobNotFound) {
		s.refused(w, r, err)
		return
	}
	if code, msg := s.authorizeStatus(r, st, found); code != 0 {
		if code == http.StatusNotFound {
			msg = "no migration job with id " + strconv.Quote(truncateText(id, 64))
		}
		writeError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// statusAllowed: any credential of the job's project (the TARGET_TOKEN
// that started it, its API secret, a service account, an OAuth token).
var statusAllowed = auth.Allowed{Secret: true, Token: true, ServiceAccount: true, OAuth: true, Session: true}

// authorizeStatus lets only the job's project read a job. The 96-bit job
// id alone is not a credential: status reports carry event counts and
// failures. Valid credentials of another project get the same 404 as an
// unknown id, so a caller cannot probe which ids exist; invalid ones 401.
func (s *Service) authorizeStatus(r *http.Request, st Status, found bool) (int, string) {
	if found {
		if _, err := s.cfg.Projects.RequestFor(r, statusAllowed, st.ProjectID); err == nil {
			return 0, ""
		}
	}
	if _, err := s.cfg.Projects.Request(r, statusAllowed); err != nil {
		return http.StatusUnauthorized, "a credential of the job's project is required (Basic auth: the project token or API secret as user name, or a service account)"
	}
	return http.StatusNotFound, ""
}

// refused answers an error: a RequestError with its status, anything else
// as a 500 whose details stay in the log. Messages never carry the
// credentials: no refusal quotes them.
func (s *Service) refused(w http.ResponseWriter, r *http.Request, err error) {
	if re, ok := errors.AsType[*RequestError](err); ok {
		s.cfg.Logger.Info("amplitude migration request refused", "path", r.URL.Path, "code", re.Status, "reason", re.Msg)
		if re.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((re.RetryAfter+time.Second-1)/time.Second)))
		}
		writeError(w, re.Status, re.Msg)
		return
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone
	}
	s.cfg.Logger.Error("amplitude migration request failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "the migration could not be started; see the server log")
}
