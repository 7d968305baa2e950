package server

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/scheduler"
)

// syncFigures is what the sync metrics show of one import, read from the
// store (so every process sharing it reports the same), at most every
// few seconds however often /metrics is scraped.
type syncFigures struct {
	project, importID string
	lastSuccess       float64 // unix seconds; 0: never
	status            string  // last finished run's
	read, imported    float64 // the last finished run's rows
	duplicate, failed float64
	lastNew           float64 // unix seconds rows last arrived; 0: unknown
}

type syncMetrics struct {
	st  store.Store
	cat *scheduler.Catalog
	ttl time.Duration

	mu   sync.Mutex
	at   time.Time
	figs []syncFigures
}

var runStatuses = []string{store.RunSucceeded, store.RunFailed, store.RunCancelled}

// registerSyncMetrics adds the per-import sync figures to reg.
func registerSyncMetrics(reg *metrics.Registry, st store.Store, cat *scheduler.Catalog) {
	m := &syncMetrics{st: st, cat: cat, ttl: 5 * time.Second}
	labels := []string{metrics.ProjectLabel, "import"}
	reg.GaugeFamily("tributary_sync_last_success_timestamp_seconds", "When the import's last successful run ended (unix seconds).", labels,
		m.each(func(f syncFigures, emit func(float64, ...string)) {
			if f.lastSuccess > 0 {
				emit(f.lastSuccess, f.project, f.importID)
			}
		}))
	reg.GaugeFamily("tributary_sync_last_run_status", "1 for the status of the import's last finished run, 0 for the others.",
		[]string{metrics.ProjectLabel, "import", "status"},
		m.each(func(f syncFigures, emit func(float64, ...string)) {
			if f.status == "" {
				return
			}
			for _, s := range runStatuses {
				v := 0.0
				if s == f.status {
					v = 1
				}
				emit(v, f.project, f.importID, s)
			}
		}))
	reg.GaugeFamily("tributary_sync_last_run_rows", "Rows of the import's last finished run, by outcome (read, imported, duplicate, refused).",
		[]string{metrics.ProjectLabel, "import", "outcome"},
		m.each(func(f syncFigures, emit func(float64, ...string)) {
			if f.status == "" {
				return
			}
			emit(f.read, f.project, f.importID, "read")
			emit(f.imported, f.project, f.importID, "imported")
			emit(f.duplicate, f.project, f.importID, "duplicate")
			emit(f.failed, f.project, f.importID, "refused")
		}))
	reg.GaugeFamily("tributary_sync_watermark_age_seconds", "Seconds since a run of the import last brought new rows (its freshness).", labels,
		m.each(func(f syncFigures, emit func(float64, ...string)) {
			if f.lastNew > 0 {
				emit(float64(time.Now().UnixMilli())/1000-f.lastNew, f.project, f.importID)
			}
		}))
}

func (m *syncMetrics) each(f func(syncFigures, func(float64, ...string))) func(func(float64, ...string)) {
	return func(emit func(float64, ...string)) {
		for _, fig := range m.figures() {
			f(fig, emit)
		}
	}
}

func (m *syncMetrics) figures() []syncFigures {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.at) < m.ttl {
		return m.figs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []syncFigures
	for _, e := range m.cat.List(0) {
		f := syncFigures{project: fmt.Sprint(e.Import.ProjectID), importID: e.Import.ID}
		runs, err := m.st.Runs(ctx, store.RunFilter{Project: e.Import.ProjectID, Import: e.Import.ID, Limit: 100})
		if err != nil {
			return m.figs // the last figures rather than none
		}
		for _, r := range runs {
			if r.Status == store.RunRunning {
				continue
			}
			if f.status == "" {
				f.status = r.Status
				f.read, f.imported, f.duplicate, f.failed = float64(r.RowsRead), float64(r.Imported), float64(r.Duplicate), float64(r.Failed)
			}
			if r.Status == store.RunSucceeded {
				f.lastSuccess = float64(r.EndedMs) / 1000
				break
			}
		}
		if sts, err := m.st.RuleStates(ctx, e.Import.ProjectID, e.Import.ID); err == nil {
			for _, s := range sts {
				var d struct {
					LastNewMs int64 `json:"last_new_ms"`
				}
				if s.Rule == "freshness" && json.Unmarshal(s.Detail, &d) == nil && d.LastNewMs > 0 {
					f.lastNew = float64(d.LastNewMs) / 1000
				}
			}
		}
		out = append(out, f)
	}
	m.figs, m.at = out, time.Now()
	return out
}
