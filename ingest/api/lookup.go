package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/internal/config"
)

// Lookup tables are declared in the configuration (the public API, too,
// only replaces tables created elsewhere) and filled by PUT.
var lookupAuth = auth.Allowed{Secret: true, ServiceAccount: true, OAuth: true}

type lookupTableItem struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type lookupList struct {
	Code    int               `json:"code"`
	Status  string            `json:"status"`
	Results []lookupTableItem `json:"results"`
}

type lookupOK struct {
	Code   int    `json:"code"`
	Status string `json:"status"`
}

type lookupRowFailure struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

type lookupInvalid struct {
	Code   int                `json:"code"`
	Error  string             `json:"error"`
	Status string             `json:"status"`
	Failed []lookupRowFailure `json:"failed_records"`
}

// lookupWait bounds how long an upload waits for memory (lookup.Gate)
// before it is told to retry.
const lookupWait = 2 * time.Minute

// newLookupGate sizes the memory of concurrent lookup uploads: with a
// memory_limit, three eighths of it (half the Go heap's share: an upload's
// cost is about half its parsed table, half the store's transaction);
// without, one table of the largest size at a time. An upload larger
// than the capacity runs alone.
func newLookupGate(cfg *config.Config) *lookup.Gate {
	if cfg != nil {
		if total := cfg.MemoryBudget(); total > 0 {
			return lookup.NewGate(total / 8 * 3)
		}
	}
	return lookup.NewGate(0)
}

// handleLookupList serves GET /lookup-tables?project_id=N.
func (s *Server) handleLookupList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use GET to list lookup tables, PUT /lookup-tables/{id} to replace one")
		return
	}
	p, ok := s.authorize(w, r, lookupAuth, false)
	if !ok {
		return
	}
	out := lookupList{Code: 200, Status: "OK", Results: []lookupTableItem{}}
	for _, lt := range p.Project.LookupTables {
		out.Results = append(out.Results, lookupTableItem{ID: lt.ID, Name: lt.Name})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleLookupPut serves PUT /lookup-tables/{id}: the CSV replaces the
// table whole, or nothing changes.
func (s *Server) handleLookupPut(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		writeError(w, http.StatusMethodNotAllowed, "use PUT with a text/csv body to replace a lookup table")
		return
	}
	p, ok := s.authorize(w, r, lookupAuth, true)
	if !ok {
		return
	}
	id := r.PathValue("id")
	lt, found := p.Project.LookupTable(id)
	if !found {
		writeJSON(w, http.StatusNotFound, trackErrorBody{Error: fmt.Sprintf("Lookup table with id '%s' was not found.", id), Status: "Not Found"})
		return
	}
	gz := strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip")
	size := int64(-1) // unknown: gzip or chunked
	if !gz && r.ContentLength >= 0 {
		size = r.ContentLength
	}
	if size > lookup.DefaultMaxBytes {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the table is larger than %d MB uncompressed", lookup.DefaultMaxBytes>>20))
		return
	}
	// The table is held whole until stored: wait for memory before
	// reading it (the body's minimum rate counts from the first read).
	ctx, cancel := context.WithTimeout(r.Context(), lookupWait)
	release, err := s.lookupGate.Enter(ctx, size)
	cancel()
	if err != nil {
		if r.Context().Err() != nil {
			return // the client gave up
		}
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("other lookup-table uploads are using the memory set aside for them (%d MB); retry", s.lookupGate.Capacity()>>20))
		return
	}
	defer release()
	var body io.Reader = r.Body
	if gz {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Content-Encoding is gzip but the body is not: "+err.Error())
			return
		}
		defer zr.Close()
		body = zr
	}
	// Parse reads at most the size limit of uncompressed bytes, so a gzip
	// bomb stops there.
	t, err := lookup.Parse(body, lookup.Options{SizeHint: max(size, 0)})
	var rowErrs *lookup.RowErrors
	switch {
	case errors.Is(err, lookup.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the table is larger than %d MB uncompressed", lookup.DefaultMaxBytes>>20))
		return
	case errors.As(err, &rowErrs):
		out := lookupInvalid{Code: 400, Error: "Some data points in the request failed validation.", Status: "Bad Request"}
		for _, re := range rowErrs.Rows {
			out.Failed = append(out.Failed, lookupRowFailure{Index: re.Row, Message: re.Message})
		}
		writeJSON(w, http.StatusBadRequest, out)
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.store.ReplaceLookup(r.Context(), p.Project.ID, lt.ID, t); err != nil {
		s.log.Error("lookup table replace failed", "project", p.Project.ID, "table", lt.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the table could not be stored; the previous version is unchanged, retry")
		return
	}
	s.enrich.Invalidate(p.Project.ID, lt.ID)
	s.log.Info("lookup table replaced", "project", p.Project.ID, "table", lt.ID, "rows", t.Len())
	writeJSON(w, http.StatusOK, lookupOK{Code: 200, Status: "OK"})
}
