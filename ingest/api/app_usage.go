package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// Monthly usage: the events a project stored per calendar month (UTC) and
// source, as the store counts them (store.Usage), over the app API and in
// /metrics.

const usagePath = "/api/app/projects/{project_id}/usage"

// usageSources are listed in every month, with 0 when a month has none, so
// clients and dashboards see a stable shape; other sources show when used.
var usageSources = []string{store.SourceImport, store.SourceTrack, store.SourceWarehouse, store.SourceAmplitude}

type usageMonth struct {
	Month   string           `json:"month"`
	Total   int64            `json:"total"`
	Sources map[string]int64 `json:"sources"`
}

func newUsageMonth(m string) *usageMonth {
	um := &usageMonth{Month: m, Sources: make(map[string]int64, len(usageSources))}
	for _, src := range usageSources {
		um.Sources[src] = 0
	}
	return um
}

// handleUsage answers GET {app}/api/app/projects/{project_id}/usage
// [?month=YYYY-MM]: {"status":"ok","results":{"months":[…]}}, newest month
// first. Any role may read it; auth and errors are the app API's
// (AppAuthorize); it needs only the store.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	_, project, ok := s.AppAuthorize(w, r, false)
	if !ok {
		return
	}
	month := r.URL.Query().Get("month")
	if month != "" {
		if _, err := time.Parse("2006-01", month); err != nil {
			AppError(w, http.StatusBadRequest, fmt.Sprintf("month %q: want YYYY-MM", month))
			return
		}
	}
	rows, err := s.store.Usage(r.Context(), project)
	if err != nil {
		s.log.Error("reading usage", "project", project, "err", err)
		AppError(w, http.StatusServiceUnavailable, "usage could not be read; retry")
		return
	}
	months := []*usageMonth{}
	for _, u := range rows { // newest month first, as the store returns them
		if month != "" && u.Month != month {
			continue
		}
		if len(months) == 0 || months[len(months)-1].Month != u.Month {
			months = append(months, newUsageMonth(u.Month))
		}
		um := months[len(months)-1]
		um.Sources[u.Source] += u.Events
		um.Total += u.Events
	}
	if month != "" && len(months) == 0 {
		months = append(months, newUsageMonth(month)) // asked for: a month of zeros
	}
	AppOK(w, map[string]any{"months": months})
}

// registerUsageMetrics exposes the current month's counters of every
// configured project in /metrics, read from the store at scrape time.
func (s *Server) registerUsageMetrics(reg *metrics.Registry) {
	reg.GaugeFamily("tributary_usage_events",
		"Events stored in the current calendar month (UTC) by project and source: the monthly usage counters.",
		[]string{"project", "source", "month"},
		func(emit func(float64, ...string)) {
			if s.cfg == nil || s.store == nil {
				return
			}
			month := s.now().UTC().Format("2006-01")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, p := range s.cfg.Projects {
				if p.Region != s.cfg.Region {
					continue // its events are refused here
				}
				rows, err := s.store.Usage(ctx, p.ID)
				if err != nil {
					s.log.Warn("metrics: reading usage", "project", p.ID, "err", err)
					continue
				}
				id := strconv.FormatInt(p.ID, 10)
				seen := map[string]bool{}
				for _, u := range rows {
					if u.Month == month {
						emit(float64(u.Events), id, u.Source, month)
						seen[u.Source] = true
					}
				}
				for _, src := range usageSources {
					if !seen[src] {
						emit(0, id, src, month)
					}
				}
			}
		})
}
