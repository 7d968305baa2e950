package api

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/enrich"
	"github.com/tributary-dev/tributary/ingest/export"
)

var exportAuth = auth.Allowed{Secret: true, ServiceAccount: true, OAuth: true}

func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	p, ok := s.authorize(w, r, exportAuth, false)
	if !ok {
		return
	}
	req, err := export.ParseRequest(p.Project.ID, r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Enrich, err = s.enrich.For(r.Context(), p.Project, enrich.Events); err != nil {
		s.log.Error("export: loading lookup tables", "project", p.Project.ID, "err", err)
		writeError(w, http.StatusInternalServerError, "loading lookup tables failed")
		return
	}
	var done func()
	if req.History, done, err = s.history(r.Context(), p.Project.ID, req.Where.Keys()...); err != nil {
		return // the client went away while waiting its turn
	}
	defer done()
	var out io.Writer = w
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		out = zw
	}
	n, err := export.Write(r.Context(), s.store, req, out)
	s.met.exported.Add(int64(n), strconv.FormatInt(p.Project.ID, 10))
	if err != nil && !errors.Is(err, r.Context().Err()) {
		// The status line is gone; cut the connection so the client sees
		// a truncated response instead of a silently short one.
		s.log.Error("export failed mid-stream", "project", p.Project.ID, "written", n, "err", err)
		panic(http.ErrAbortHandler)
	}
}
