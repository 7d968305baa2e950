package server

import (
	"context"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// instrumentedStore times every durable write: the commit latency that
// the group committer amortises across requests.
type instrumentedStore struct {
	store.Store
	latency *metrics.Histogram
	events  *metrics.CounterVec
}

func instrumented(st store.Store, reg *metrics.Registry) store.Store {
	return &instrumentedStore{
		Store:   st,
		latency: reg.Histogram("tributary_store_commit_seconds", "Duration of one durable store transaction (a group commit).", 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
		events:  reg.Counter("tributary_store_events_written_total", "Events written to the store, by outcome.", "outcome"),
	}
}

func (s *instrumentedStore) Write(ctx context.Context, b []store.Batch) (store.WriteResult, error) {
	start := time.Now()
	res, err := s.Store.Write(ctx, b)
	s.latency.Observe(time.Since(start))
	if err == nil {
		s.events.Add(int64(res.Inserted), "inserted")
		s.events.Add(int64(res.Duplicates), "duplicate")
	}
	return res, err
}
