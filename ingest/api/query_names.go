package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

// eventNamesWindow is how far back the event-name list looks: events older
// than 30 days do not appear in event lists (spec §8), imported history
// included; segmentation still counts them.
const eventNamesWindow = 30 * 24 * time.Hour

const (
	defaultEventNames = 255
	maxEventNames     = 100000
)

// nameStat counts one event name: events and, for unique and average,
// distinct canonical users.
type nameStat struct {
	name   string
	events int64
	users  map[string]struct{}
}

// handleEventNames serves the list of event names seen in the last 30
// days, most frequent first under the requested type (ties by name).
func (s *Server) handleEventNames(w http.ResponseWriter, r *http.Request) {
	p, q, ok := s.queryParams(w, r, http.MethodGet, http.MethodPost)
	if !ok {
		return
	}
	kind := q.Get("type")
	switch kind {
	case "":
		kind = "general"
	case "general", "unique", "average":
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("type must be general, unique or average, got %q", kind))
		return
	}
	limit, err := positiveInt(q, "limit", defaultEventNames, maxEventNames)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := s.now()
	stats := map[string]*nameStat{}
	count := func(e *store.Event) error {
		st, ok := stats[e.Name]
		if !ok {
			st = &nameStat{name: strings.Clone(e.Name)}
			if kind != "general" {
				st.users = map[string]struct{}{}
			}
			stats[st.name] = st
		}
		st.events++
		if st.users != nil {
			if _, seen := st.users[e.DistinctID]; !seen {
				st.users[strings.Clone(e.DistinctID)] = struct{}{}
			}
		}
		return nil
	}
	// Events may be stamped up to an hour ahead of the clock; a day of
	// slack keeps every accepted one in view.
	scan := store.Scan{Project: p.Project.ID, Resolve: kind != "general"}
	from, to := now.Add(-eventNamesWindow).UnixMilli(), now.Add(24*time.Hour).UnixMilli()
	if err := scanDays(r.Context(), s.store, scan, from, to, count); err != nil {
		s.answerReadError(w, r, "event names", p.Project.ID, err)
		return
	}
	score := func(st *nameStat) float64 {
		switch kind {
		case "unique":
			return float64(len(st.users))
		case "average":
			return float64(st.events) / float64(max(len(st.users), 1))
		}
		return float64(st.events)
	}
	list := make([]*nameStat, 0, len(stats))
	for _, st := range stats {
		list = append(list, st)
	}
	slices.SortFunc(list, func(a, b *nameStat) int {
		return cmp.Or(cmp.Compare(score(b), score(a)), strings.Compare(a.name, b.name))
	})
	names := make([]string, 0, min(limit, len(list)))
	for _, st := range list[:min(limit, len(list))] {
		names = append(names, st.name)
	}
	writeJSON(w, http.StatusOK, names)
}
