package appapi

import (
	"time"

	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// importStatus is what an import's health needs at a glance, beside the
// public fields: its last run's rows and end, its next scheduled run and
// the freshness of its data.
type importStatus struct {
	LastRunID       string `json:"last_run_id,omitempty"`
	LastRunImported *int64 `json:"last_run_num_events_imported,omitempty"`
	LastRunFailed   *int64 `json:"last_run_num_rows_failed,omitempty"`
	LastRunEnd      *int64 `json:"last_run_end_time,omitempty"`
	// NextRun: seconds; absent for paused and API-only imports.
	NextRun *int64 `json:"next_run,omitempty"`
	// NewestInsertTime is the insert time of the newest row committed
	// (time_based imports): now minus it is the data's freshness.
	NewestInsertTime *int64 `json:"newest_insert_time,omitempty"`
}

func (s *Server) importStatus(a *appRequest, e scheduler.Entry) *importStatus {
	st := &importStatus{}
	ctx := a.r.Context()
	if runs, err := s.store.Runs(ctx, store.RunFilter{Project: e.Import.ProjectID, Import: e.Import.ID, Limit: 1}); err == nil && len(runs) > 0 {
		r := s.runView(runs[0])
		st.LastRunID, st.LastRunImported, st.LastRunFailed, st.LastRunEnd = r.RunID, &r.NumEventsImported, &r.RowsFailed, r.EndTime
	}
	if t, ok := scheduler.NextRun(e, time.Now()); ok {
		sec := t.Unix()
		st.NextRun = &sec
	}
	if ck, err := s.store.Checkpoint(ctx, e.Import.ProjectID, e.Import.ID); err == nil {
		if t, ok := run.Watermark(ck); ok {
			sec := t.Unix()
			st.NewestInsertTime = &sec
		}
	}
	return st
}

// runProgress is a running run's live progress: the source's row count
// when it reported one (then an ETA at the current rate) and the
// transient source errors recovered from so far.
type runProgress struct {
	RowsTotal  int64    `json:"rows_total,omitempty"`
	Percent    *float64 `json:"percent,omitempty"`
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
	Retries    int      `json:"retries"`
}

func newRunProgress(st run.Stats) *runProgress {
	p := &runProgress{RowsTotal: st.Total, Retries: st.Retries}
	if st.Total > 0 {
		pct := min(100, float64(st.RowsRead)*100/float64(st.Total))
		p.Percent = &pct
		if rate := st.Rate(); rate > 0 && st.Total > st.RowsRead {
			eta := float64(st.Total-st.RowsRead) / rate
			p.ETASeconds = &eta
		}
	}
	return p
}
