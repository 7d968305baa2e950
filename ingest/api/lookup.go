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
// memory_limit, three eighths of it (what the Go heap and DuckDB share
// beyond their steady state); without, lookup.NewGate's default. Each
// upload reserves lookup.UploadMemory whatever its size.
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
	if !gz && r.ContentLength > lookup.DefaultMaxBytes {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the table is larger than %d MB uncompressed", lookup.DefaultMaxBytes>>20))
		return
	}
	// An upload streams into the store a batch at a time, so its memory
	// is about the same whatever its size (lookup.UploadMemory); the gate
	// bounds how many are in flight. Wait for a place before reading the
	// body (its minimum rate counts from the first read).
	ctx, cancel := context.WithTimeout(r.Context(), lookupWait)
	release, err := s.lookupGate.Enter(ctx)
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
	// The stream reads at most the size limit of uncompressed bytes, so a
	// gzip bomb stops there. A bad row or an oversized body found after
	// rows went into the store rolls the replacement back.
	rows, err := lookup.NewStream(body, lookup.Options{})
	if err == nil {
		err = s.store.ReplaceLookup(r.Context(), p.Project.ID, lt.ID, rows)
		if err != nil && rows.Err() == nil && !errors.Is(err, lookup.ErrInvalid) {
			s.log.Error("lookup table replace failed", "project", p.Project.ID, "table", lt.ID, "err", err)
			writeError(w, http.StatusServiceUnavailable, "the table could not be stored; the previous version is unchanged, retry")
			return
		}
		if rows.Err() != nil {
			err = rows.Err() // the upload's fault, not the store's
		}
	}
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
	s.enrich.Invalidate(p.Project.ID, lt.ID)
	s.log.Info("lookup table replaced", "project", p.Project.ID, "table", lt.ID, "rows", rows.Rows())
	writeJSON(w, http.StatusOK, lookupOK{Code: 200, Status: "OK"})
}
