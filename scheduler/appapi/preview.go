package appapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/engine/preview"
	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/scheduler"
)

// previewTimeout bounds a dry run: it holds a warehouse connection and an
// HTTP request open.
const previewTimeout = time.Minute

type previewColumn struct {
	Column     string `json:"column"`
	SourceType string `json:"source_type"`
	Type       string `json:"type,omitempty"`
	Role       string `json:"role"`
	Property   string `json:"property,omitempty"`
	Renamed    bool   `json:"renamed,omitempty"`
	Flattened  bool   `json:"flattened,omitempty"`
	Note       string `json:"note,omitempty"`
	Nulls      int64  `json:"nulls"`
	Example    string `json:"example,omitempty"`
}

type previewRefusal struct {
	Row     int64  `json:"row"`
	Key     string `json:"key,omitempty"`
	Column  string `json:"column,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

type previewView struct {
	RowsRead    int64             `json:"rows_read"`
	Records     []json.RawMessage `json:"records"`
	Columns     []previewColumn   `json:"columns"`
	Refused     []previewRefusal  `json:"refused"`
	ConfigError string            `json:"config_error,omitempty"`
}

// handleImportPreview answers GET …/imports/{import_id}/preview[?limit=N]:
// what `tributary preview` reports, as JSON. It reads the source and
// writes nothing, so every role may call it.
func (s *Server) handleImportPreview(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	limit := int64(20)
	if v := a.r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > 100 {
			api.AppError(a.w, http.StatusBadRequest, "limit: must be an integer from 1 to 100")
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(a.r.Context(), previewTimeout)
	defer cancel()
	rep, err := s.sched.Catalog().Preview(ctx, a.project, e.Import.ID, limit)
	switch {
	case errors.Is(err, scheduler.ErrNotFound):
		api.AppError(a.w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		// A source that cannot be reached now: the cause names the
		// warehouse, never its credentials (connectors redact them).
		api.AppError(a.w, http.StatusBadGateway, "the preview could not read the source: "+err.Error())
		return
	}
	api.AppOK(a.w, newPreviewView(rep))
}

func newPreviewView(rep *preview.Report) previewView {
	v := previewView{RowsRead: rep.Rows, Records: make([]json.RawMessage, 0, len(rep.Records)),
		Columns: make([]previewColumn, 0, len(rep.Columns)), Refused: make([]previewRefusal, 0, len(rep.RowErrors))}
	if rep.ConfigErr != nil {
		v.ConfigError = rep.ConfigErr.Error()
	}
	for _, r := range rep.Records {
		v.Records = append(v.Records, r)
	}
	for _, c := range rep.Columns {
		pc := previewColumn{Column: c.Column, SourceType: c.SourceType, Role: string(c.Role), Property: c.Property,
			Renamed: c.Renamed, Flattened: c.Flattened, Note: c.Note, Nulls: c.Nulls, Example: c.Example}
		if c.Type != nil {
			pc.Type = c.Type.String()
		}
		v.Columns = append(v.Columns, pc)
	}
	for _, e := range rep.RowErrors {
		v.Refused = append(v.Refused, previewRefusal{Row: e.Row, Key: e.Key, Column: e.Column, Field: e.Field, Message: e.Message})
	}
	return v
}
