package api

import (
	"context"

	"github.com/tributary-dev/tributary/ingest/enrich"
	"github.com/tributary-dev/tributary/ingest/store"
)

// history returns the History enrichment for a query reading keys
// (nil when none is "$user.…" or the store keeps no History tables) and
// the function that ends it. Such a query looks up versions while its
// event scan is open, which on the Postgres store holds a pooled
// connection: several of them at once could each hold one and wait for
// another once the pool is spent. So they take turns (s.historyGate);
// every other read is unaffected.
func (s *Server) history(ctx context.Context, project int64, keys ...string) (*enrich.History, func(), error) {
	hs, _ := s.store.(store.Histories) // nil: a store without History tables
	h := enrich.NewHistory(hs, project, keys...)
	if h == nil {
		return nil, func() {}, nil
	}
	select {
	case s.historyGate <- struct{}{}:
		return h, func() { <-s.historyGate }, nil
	case <-ctx.Done():
		return nil, func() {}, ctx.Err()
	}
}
