package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memCounter stands in for the store that processes share.
type memCounter struct {
	mu    sync.Mutex
	m     map[[2]int64]int64
	calls int
	fail  bool
}

func (c *memCounter) AddRate(_ context.Context, project, minute, n int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.fail {
		return 0, errors.New("store down")
	}
	k := [2]int64{project, minute}
	c.m[k] += n
	return c.m[k], nil
}

func TestSharedBudgetAcrossLimiters(t *testing.T) {
	now := time.Unix(1_800_000_040, 0) // 40 s into a minute
	clock := func() time.Time { return now }
	c := &memCounter{m: map[[2]int64]int64{}}
	a, b := NewShared(clock, c, nil), NewShared(clock, c, nil)
	const limit, n = 32_000, 10
	ctx := context.Background()
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		l := a
		if w%2 == 1 {
			l = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ { // 80,000 bytes offered in all
				if l.Allow(ctx, 7, n, limit) {
					accepted.Add(n)
				}
			}
		}()
	}
	wg.Wait()
	chunk := int64(limit / chunkDivisor)
	if got := accepted.Load(); got > limit || got < limit-2*chunk {
		t.Fatalf("accepted %d bytes over two limiters, want within (%d, %d]", got, limit-2*chunk, limit)
	}
	// One round trip per chunk, not per request (8,000 were made), and
	// none once the minute's budget is known to be spent.
	if c.calls > int(limit/chunk)+2 {
		t.Fatalf("%d counter calls for %d accepted bytes", c.calls, accepted.Load())
	}
	if !a.Allow(ctx, 8, n, limit) {
		t.Fatal("projects must not share a budget")
	}

	// A minute later both the shared budget and the rolling window are fresh.
	now = now.Add(60 * time.Second)
	if !b.Allow(ctx, 7, n, limit) {
		t.Fatal("a new minute must bring a new shared budget")
	}
	if b.Allow(ctx, 7, limit+1, limit) {
		t.Fatal("a request larger than the budget is refused")
	}
}

func TestSharedLocalRefusalRefunds(t *testing.T) {
	now := time.Unix(1_800_000_059, 0) // the last second of a minute
	clock := func() time.Time { return now }
	c := &memCounter{m: map[[2]int64]int64{}}
	l := NewShared(clock, c, nil)
	ctx := context.Background()
	const limit = 3200
	if !l.Allow(ctx, 1, limit, limit) {
		t.Fatal("the whole budget at once")
	}
	// A new shared minute, but this process's rolling minute is still full:
	// refused, and the reserved bytes stay with the process.
	now = now.Add(time.Second)
	if l.Allow(ctx, 1, 50, limit) {
		t.Fatal("the local rolling window must still refuse")
	}
	calls := c.calls
	now = now.Add(59 * time.Second) // the rolling window has moved on
	if !l.Allow(ctx, 1, 50, limit) || c.calls != calls {
		t.Fatalf("the refunded reservation must serve the request without a round trip (%d calls)", c.calls-calls)
	}
}

func TestSharedCounterDownFailsOpen(t *testing.T) {
	c := &memCounter{m: map[[2]int64]int64{}, fail: true}
	l := NewShared(nil, c, nil)
	ctx := context.Background()
	if !l.Allow(ctx, 1, 100, 1000) {
		t.Fatal("an unavailable counter leaves the local limit only")
	}
	if l.Allow(ctx, 1, 1000, 1000) {
		t.Fatal("the local limit still holds")
	}
}
