package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Daily usage: the events a project stored per UTC day and source
// (store.Usage.DailyUsage), for charts of events per day by source — the
// console's overview. The store counts them as it commits the events, so
// telling /track from /import costs no read of the events.

const dailyUsagePath = usagePath + "/daily"

// maxUsageDays bounds the window a request may ask for.
const maxUsageDays = 90

type usageDay struct {
	Day     string           `json:"day"`
	Total   int64            `json:"total"`
	Sources map[string]int64 `json:"sources"`
}

// handleDailyUsage answers GET {app}/api/app/projects/{project_id}/usage/daily
// [?days=N] (1–90, default 30): {"status":"ok","results":{"days":[…]}},
// one entry per UTC day of the last N days up to today, oldest first, each
// listing the four sources (0 when unused). Any role may read it.
func (s *Server) handleDailyUsage(w http.ResponseWriter, r *http.Request) {
	_, project, ok := s.AppAuthorize(w, r, false)
	if !ok {
		return
	}
	n := 30
	if v := r.URL.Query().Get("days"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > maxUsageDays {
			AppError(w, http.StatusBadRequest, fmt.Sprintf("days %q: want a whole number from 1 to %d", v, maxUsageDays))
			return
		}
		n = d
	}
	today := s.now().UTC().Truncate(24 * time.Hour)
	days := make([]usageDay, n)
	index := make(map[string]int, n)
	for i := range days {
		d := today.AddDate(0, 0, i-n+1).Format(time.DateOnly)
		days[i] = usageDay{Day: d, Sources: make(map[string]int64, len(usageSources))}
		for _, src := range usageSources {
			days[i].Sources[src] = 0
		}
		index[d] = i
	}
	rows, err := s.store.DailyUsage(r.Context(), project, days[0].Day)
	if err != nil {
		s.log.Error("reading daily usage", "project", project, "err", err)
		AppError(w, http.StatusServiceUnavailable, "usage could not be read; retry")
		return
	}
	for _, u := range rows {
		if i, ok := index[u.Day]; ok { // a day past today (a clock step back) is left out
			days[i].Sources[u.Source] += u.Events
			days[i].Total += u.Events
		}
	}
	AppOK(w, map[string]any{"days": days})
}
