package appapi

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// importView is the public WarehouseImport (WarehouseImportDetail with
// detail) plus what only Tributary has: origin, file, schedule and the
// source kind. The connection shows as its id (warehouse_source_id);
// connection fields are never shown: they may hold secrets.
type importView struct {
	ID          json.RawMessage `json:"id"` // a number when the id is numeric, as the public API's are
	ImportType  string          `json:"import_type"`
	SyncMode    string          `json:"sync_mode"`
	Created     string          `json:"created,omitempty"`
	CreatorName string          `json:"creator_name,omitempty"`
	// WarehouseSourceID is a number when the id is numeric, as the public API's are.
	WarehouseSourceID json.RawMessage  `json:"warehouse_source_id,omitempty"`
	TableParams       connectors.Table `json:"table_params"`
	Paused            bool             `json:"paused"`
	PausedReason      string           `json:"paused_reason,omitempty"`
	RunEvery          *int64           `json:"run_every,omitempty"`
	LastDispatch      *int64           `json:"last_dispatch"`
	IsDeleted         bool             `json:"is_deleted"`

	Schedule   string `json:"schedule"`
	Origin     string `json:"origin"`
	File       string `json:"file,omitempty"`
	SourceKind string `json:"source_kind"`
	SyncStatus string `json:"last_run_status,omitempty"`

	*importDetail
	*importStatus
}

type importDetail struct {
	EventName            *string           `json:"event_name"`
	EventColumnName      *string           `json:"event_column_name"`
	TimeColumnName       *string           `json:"time_column_name"`
	UserColumnName       *string           `json:"user_column_name"`
	DeviceColumnName     *string           `json:"device_column_name,omitempty"`
	InsertTimeColumnName *string           `json:"insert_time_column_name"`
	PropertyMappings     map[string]string `json:"property_mappings"`
	GroupKey             *string           `json:"group_key"`
	GroupIDColumn        *string           `json:"group_id_column"`
	Lookback             string            `json:"lookback,omitempty"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func idJSON(id string) json.RawMessage {
	if _, err := strconv.ParseInt(id, 10, 64); err == nil {
		return json.RawMessage(id)
	}
	b, _ := json.Marshal(id)
	return b
}

func (s *Server) view(a *appRequest, e scheduler.Entry, detail bool) importView {
	im := e.Import
	v := importView{
		ID: idJSON(im.ID), ImportType: im.ImportType, SyncMode: im.SyncMode, CreatorName: e.Creator,
		TableParams: im.TableParams, Paused: im.Paused, PausedReason: e.PausedReason, IsDeleted: e.Deleted,
		Schedule: im.Schedule, Origin: e.Origin, File: im.File(), SourceKind: im.SourceKind(),
	}
	if im.Connection != "" {
		v.WarehouseSourceID = idJSON(im.Connection)
	}
	if v.Schedule == "" {
		v.Schedule = "api"
	}
	if e.CreatedMs > 0 {
		v.Created = time.UnixMilli(e.CreatedMs).UTC().Format(time.RFC3339)
	}
	if ns, ok := scheduler.RunEvery(im.Schedule); ok {
		v.RunEvery = &ns
	}
	if runs, err := s.store.Runs(a.r.Context(), store.RunFilter{Project: im.ProjectID, Import: im.ID, Limit: 1}); err == nil && len(runs) > 0 {
		t := millisToSeconds(runs[0].StartedMs)
		v.LastDispatch, v.SyncStatus = &t, runs[0].Status
	}
	v.importStatus = s.importStatus(a, e)
	if detail {
		v.importDetail = &importDetail{
			EventName: nullable(im.Event()), EventColumnName: nullable(im.EventColumnName),
			TimeColumnName: nullable(im.TimeColumnName), UserColumnName: nullable(im.UserColumnName),
			DeviceColumnName: nullable(im.DeviceColumnName), InsertTimeColumnName: nullable(im.InsertTimeColumnName),
			PropertyMappings: im.PropertyMappings, GroupKey: nullable(im.GroupKey), GroupIDColumn: nullable(im.GroupIDColumn),
			Lookback: im.Lookback,
		}
	}
	return v
}

// runView is one run of the history (decisions.md): the public fields
// first, then the rest of what a run records.
type runView struct {
	RunID             string                `json:"run_id"`
	Status            string                `json:"status"`
	StartTime         int64                 `json:"start_time"`
	EndTime           *int64                `json:"end_time"`
	NumEventsImported int64                 `json:"num_events_imported"`
	Trigger           string                `json:"trigger"`
	Reason            string                `json:"reason,omitempty"`
	RowsRead          int64                 `json:"num_rows_read"`
	Duplicates        int64                 `json:"num_duplicates"`
	RowsFailed        int64                 `json:"num_rows_failed"`
	Bytes             int64                 `json:"bytes"`
	RowsPerSecond     float64               `json:"rows_per_second"`
	Failures          json.RawMessage       `json:"failures"`
	Retries           []scheduler.RetryView `json:"retries"`            // transient source errors retried (scheduler/retries.go)
	Progress          *runProgress          `json:"progress,omitempty"` // while running (status.go)
	Mirror            *mirrorView           `json:"mirror,omitempty"`   // sync_mode mirror runs
}

func (s *Server) runView(r store.Run) runView {
	var progress *runProgress
	failures, retries := scheduler.SplitFailures(r.Failures)
	if r.Status == store.RunRunning && s.sched != nil {
		if st, ok := s.sched.Progress(r.ID); ok { // live figures, not the last save
			r.RowsRead, r.Imported, r.Duplicate, r.Failed, r.Bytes = st.RowsRead, st.Imported, st.Duplicates, st.Failed, st.Bytes
			progress = newRunProgress(st)
			retries = scheduler.RetryViews(st.RetryLog)
		}
	}
	v := runView{
		RunID: r.ID, Status: r.Status, StartTime: millisToSeconds(r.StartedMs), NumEventsImported: r.Imported,
		Trigger: r.Trigger, Reason: r.Reason, RowsRead: r.RowsRead, Duplicates: r.Duplicate, RowsFailed: r.Failed,
		Bytes: r.Bytes, Failures: failures, Retries: retries, Progress: progress,
	}
	end := r.EndedMs
	if end > 0 {
		t := millisToSeconds(end)
		v.EndTime = &t
	} else {
		end = time.Now().UnixMilli()
	}
	if d := end - r.StartedMs; d > 0 {
		v.RowsPerSecond = float64(r.RowsRead) * 1000 / float64(d)
	}
	if len(v.Failures) == 0 {
		v.Failures = json.RawMessage("[]")
	}
	return v
}
