package ratelimit

import (
	"context"
	"log/slog"
	"sync"
)

// Counter is a per-project, per-minute byte counter that every process
// sees (store.Shared satisfies it): AddRate adds n and returns the total.
type Counter interface {
	AddRate(ctx context.Context, project, minute, n int64) (total int64, err error)
}

// chunkDivisor sets a reservation to 1/32 of the budget: at the default
// 2 GB a process goes to the store about once per 64 MB (seconds apart at
// full ingest rate), and the budget a process may hold unused when others
// are refused is at most 3% of the minute.
const chunkDivisor = 32

// grants is what this process has reserved from the shared counters.
type grants struct {
	mu sync.Mutex
	m  map[int64]*grant
}

// grant is one project's reservation for one minute. Its mutex is held
// across the store round trip, so requests of one project wait for a
// reservation in flight instead of each making their own; other projects
// are not held up.
type grant struct {
	mu     sync.Mutex
	minute int64
	left   int64 // reserved and not yet charged this minute
	// spent: the shared counter reached the limit this minute. It only
	// grows within a minute, so asking again cannot help, and a client
	// hammering past its limit costs no round trips.
	spent bool
}

func (g *grants) get(key int64) *grant {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr := g.m[key]
	if gr == nil {
		gr = &grant{}
		g.m[key] = gr
	}
	return gr
}

// take charges n bytes of key against the shared budget of the current
// minute. Within what was reserved it is local; past it, it reserves a
// chunk (or n, if larger) with one AddRate. Of a reservation only the
// part below limit is granted: the reservations of all processes occupy
// disjoint ranges of the counter, so the bytes granted in a minute,
// summed over processes, never exceed limit. A refused request keeps
// whatever part was granted, for the requests after it.
func (l *Limiter) take(ctx context.Context, key, n, limit, minute int64) bool {
	gr := l.shared.get(key)
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.minute != minute { // a new minute: last minute's reservation is void
		gr.minute, gr.left, gr.spent = minute, 0, false
	}
	if gr.left >= n {
		gr.left -= n
		return true
	}
	if gr.spent {
		return false
	}
	want := max(limit/chunkDivisor, n-gr.left, 1)
	total, err := l.counter.AddRate(ctx, key, minute, want)
	if err != nil {
		// Fail open: the shared budget is a fairness guard and the
		// per-process rolling limit still holds; a store that cannot
		// count will refuse the write itself (503), which tells the
		// client more than a 429 would.
		l.log.Warn("ratelimit: shared counter unavailable; only the local limit applies", "project", key, "err", err)
		return true
	}
	before := total - want
	granted := min(max(limit-before, 0), want)
	gr.left += granted
	gr.spent = total >= limit
	if gr.left < n {
		return false
	}
	gr.left -= n
	return true
}

// refund returns n bytes that take granted to a request the local limit
// then refused, so a refusal charges nothing.
func (l *Limiter) refund(key, n, minute int64) {
	gr := l.shared.get(key)
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.minute == minute {
		gr.left += n
	}
}

// discardLogger is the default when NewShared gets no logger.
var discardLogger = slog.New(slog.DiscardHandler)
