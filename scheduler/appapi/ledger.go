package appapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// The row-level ledger and the quarantine of an import: what happened to
// one source row, run by run; the rows refused and kept; their replay.

func (s *Server) ledgerRoutes(route api.RouteFunc) {
	route("GET "+importsPath+"/{import_id}/rows/{key}", "app_import_row", s.appHandler(false, s.handleRowLedger))
	route("GET "+importsPath+"/{import_id}/quarantine", "app_import_quarantine", s.appHandler(false, s.handleQuarantine))
	route("POST "+importsPath+"/{import_id}/quarantine/replay", "app_import_replay", s.appHandler(true, s.handleReplay))
}

type ledgerView struct {
	RunID   string `json:"run_id"`
	At      int64  `json:"at"` // the run's start, seconds
	Outcome string `json:"outcome"`
	Field   string `json:"field,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func (s *Server) handleRowLedger(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	key := a.r.PathValue("key")
	if key == "" {
		api.AppError(a.w, http.StatusBadRequest, "key: must not be empty")
		return
	}
	limit, ok := queryLimit(a, 100)
	if !ok {
		return
	}
	entries, err := s.store.LedgerHistory(a.r.Context(), a.project, e.Import.ID, store.LedgerKeyHash(key), limit)
	if err != nil {
		s.log.Error("reading the ledger", "project", a.project, "import", e.Import.ID, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the ledger could not be read")
		return
	}
	out := make([]ledgerView, len(entries))
	for i, le := range entries {
		out[i] = ledgerView{RunID: le.Run, At: millisToSeconds(le.AtMs), Outcome: le.Outcome.String(), Field: le.Field, Reason: le.Reason}
	}
	api.AppOK(a.w, map[string]any{"key": key, "runs": out})
}

type quarantineView struct {
	Key    string          `json:"key"`
	RunID  string          `json:"run_id"`
	At     int64           `json:"at"`
	Field  string          `json:"field,omitempty"`
	Reason string          `json:"reason"`
	Row    json.RawMessage `json:"row"` // the row as read, column by column
}

func (s *Server) handleQuarantine(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	limit, ok := queryLimit(a, 100)
	if !ok {
		return
	}
	var after *[16]byte
	if v := a.r.URL.Query().Get("after"); v != "" {
		var h [16]byte
		b, err := hex.DecodeString(v)
		if err != nil || len(b) != len(h) {
			api.AppError(a.w, http.StatusBadRequest, "after: must be the next value of a previous page")
			return
		}
		copy(h[:], b)
		after = &h
	}
	rows, err := s.store.Quarantined(a.r.Context(), a.project, e.Import.ID, after, limit)
	if err != nil {
		s.log.Error("reading the quarantine", "project", a.project, "import", e.Import.ID, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the quarantine could not be read")
		return
	}
	out := make([]quarantineView, len(rows))
	for i, q := range rows {
		out[i] = quarantineView{Key: q.Key, RunID: q.Run, At: millisToSeconds(q.AtMs), Field: q.Field, Reason: q.Reason, Row: rowJSON(q.Row)}
	}
	res := map[string]any{"rows": out}
	if len(rows) == limit {
		res["next"] = hex.EncodeToString(rows[len(rows)-1].Hash[:])
	}
	api.AppOK(a.w, res)
}

// rowJSON renders a quarantined row (one-row Arrow IPC) as a JSON
// object; null when it cannot be read.
func rowJSON(b []byte) json.RawMessage {
	rec, err := run.DecodeRow(b)
	if err != nil {
		return json.RawMessage("null")
	}
	defer rec.Release()
	var buf bytes.Buffer
	if err := array.RecordToJSON(rec, &buf); err != nil {
		return json.RawMessage("null")
	}
	out := bytes.TrimSpace(buf.Bytes())
	if !json.Valid(out) {
		return json.RawMessage("null")
	}
	return out
}

func (s *Server) handleReplay(a *appRequest) {
	e, ok := s.entry(a)
	if !ok {
		return
	}
	if _, _, ok := readJSONObject(a, 64<<10); !ok {
		return
	}
	r, started, err := s.sched.Trigger(a.r.Context(), a.project, e.Import.ID, scheduler.TriggerReplay, false)
	switch {
	case errors.Is(err, scheduler.ErrPaused):
		api.AppError(a.w, http.StatusConflict, err.Error())
	case errors.Is(err, scheduler.ErrNotFound):
		api.AppError(a.w, http.StatusNotFound, err.Error())
	case errors.Is(err, scheduler.ErrStopping):
		api.AppError(a.w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		s.log.Error("quarantine replay", "project", a.project, "import", e.Import.ID, "err", err)
		api.AppError(a.w, http.StatusInternalServerError, "the replay could not be started")
	case !started:
		// A run of the import is in progress (or started moments ago, and
		// joined): the replay did not start.
		api.AppError(a.w, http.StatusConflict, fmt.Sprintf("run %s of this import is in progress or just started; replay once it ended", r.ID))
	default:
		s.log.Info("quarantine replay started", "project", a.project, "import", e.Import.ID, "run", r.ID, "by", a.p.Account)
		api.AppOK(a.w, map[string]string{"run_id": r.ID})
	}
}

// queryLimit reads ?limit= (1 to 1000), def when absent.
func queryLimit(a *appRequest, def int) (int, bool) {
	v := a.r.URL.Query().Get("limit")
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		api.AppError(a.w, http.StatusBadRequest, "limit: must be an integer from 1 to 1000")
		return 0, false
	}
	return n, true
}
