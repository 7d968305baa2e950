// Package commit turns many concurrent requests into few store transactions
// (group commit). Every store.Write ends in an fsync; one writer goroutine
// that takes everything queued while the previous transaction was committing
// makes N waiting requests cost one fsync instead of N, without delaying a
// lone request.
package commit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Options tune the committer.
type Options struct {
	// MaxEvents caps the records (events + merges) of one transaction, so
	// a burst does not build one huge transaction that delays everyone. A
	// single batch larger than the cap still goes alone. 0 = 50000.
	MaxEvents int
	// MaxDelay is how long a request may be held in the queue, counted from
	// its arrival, to gather company before the writer takes it; one that
	// already waited that long behind a busy writer goes at once.
	// 0 = commit as soon as the writer is free.
	MaxDelay time.Duration
}

const defaultMaxEvents = 50_000

// Writer is all the committer needs of a store: store.Store's Write.
type Writer interface {
	Write(ctx context.Context, batches []store.Batch) (store.WriteResult, error)
}

// Committer coalesces concurrent Commit calls into shared store.Writes.
type Committer struct {
	st  Writer
	opt Options

	mu     sync.Mutex
	queue  []*request // in arrival order; cancelled ones are skipped when taken
	queued int        // records in queue, cancelled ones excluded
	closed bool

	wake chan struct{} // capacity 1: "the queue or closed changed"
	done chan struct{} // closed when the writer goroutine exits
}

type request struct {
	batch    store.Batch
	size     int
	enqueued time.Time

	// Under Committer.mu: picked means the writer owns it and the caller
	// must wait for the outcome; cancelled means the caller left first.
	picked, cancelled bool

	res  store.WriteResult
	err  error
	done chan struct{}
}

// New starts a committer writing to st. Close it to stop its goroutine;
// closing the committer does not close st.
func New(st Writer, opt Options) *Committer {
	if opt.MaxEvents <= 0 {
		opt.MaxEvents = defaultMaxEvents
	}
	c := &Committer{
		st:   st,
		opt:  opt,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go c.run()
	return c
}

// Commit blocks until b is durable or has failed, and returns the counts of
// b alone. If ctx ends before the writer picks b up, b is withdrawn and
// ctx's error returned; once picked up, Commit waits for the outcome
// regardless of ctx, so a nil error always means committed.
func (c *Committer) Commit(ctx context.Context, b store.Batch) (store.WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return store.WriteResult{}, err
	}
	r := &request{batch: b, size: len(b.Events) + len(b.Merges), enqueued: time.Now(), done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return store.WriteResult{}, fmt.Errorf("commit: %w", store.ErrClosed)
	}
	c.queue = append(c.queue, r)
	c.queued += r.size
	c.mu.Unlock()
	c.signal()

	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !r.picked {
		r.cancelled = true
		c.queued -= r.size
		c.mu.Unlock()
		return store.WriteResult{}, ctx.Err()
	}
	c.mu.Unlock()
	<-r.done
	return r.res, r.err
}

// Queued reports the requests and records waiting for the next write.
func (c *Committer) Queued() (requests, records int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue), c.queued
}

// Close commits everything already queued, then stops the writer; Commit
// calls after Close has begun fail with an error wrapping store.ErrClosed.
// It is safe to call more than once.
func (c *Committer) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
	<-c.done
	return nil
}

func (c *Committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run is the single writer. It never holds mu while writing, so callers
// queue (and withdraw) freely during a commit.
func (c *Committer) run() {
	defer close(c.done)
	for {
		reqs, closed := c.take()
		if len(reqs) > 0 {
			c.write(reqs)
			continue
		}
		if closed {
			return
		}
		<-c.wake
	}
}

// take waits out MaxDelay if it applies, then claims the oldest requests up
// to MaxEvents records (at least one request).
func (c *Committer) take() ([]*request, bool) {
	if c.opt.MaxDelay > 0 {
		c.gather()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var (
		reqs []*request
		size int
		i    int
	)
	for ; i < len(c.queue); i++ {
		r := c.queue[i]
		if r.cancelled {
			continue
		}
		if len(reqs) > 0 && size+r.size > c.opt.MaxEvents {
			break
		}
		r.picked = true
		reqs = append(reqs, r)
		size += r.size
	}
	// Drop what was taken or withdrawn; keep the rest in order.
	rest := copy(c.queue, c.queue[i:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	c.queued -= size
	return reqs, c.closed
}

// gather holds the writer until the oldest live request has waited
// MaxDelay, the queue holds MaxEvents records, or Close begins.
func (c *Committer) gather() {
	for {
		c.mu.Lock()
		var oldest time.Time
		for _, r := range c.queue {
			if !r.cancelled {
				oldest = r.enqueued
				break
			}
		}
		full := c.queued >= c.opt.MaxEvents
		closed := c.closed
		c.mu.Unlock()
		if oldest.IsZero() || full || closed {
			return
		}
		wait := c.opt.MaxDelay - time.Since(oldest)
		if wait <= 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			return
		case <-c.wake:
			t.Stop()
		}
	}
}

// write commits reqs in one transaction and hands each caller its own
// counts. If the shared transaction fails, each batch is retried alone so
// one bad batch (say, one the database rejects) fails only its own caller.
func (c *Committer) write(reqs []*request) {
	batches := make([]store.Batch, len(reqs))
	for i, r := range reqs {
		batches[i] = r.batch
	}
	// The callers' contexts no longer apply: they wait for this outcome.
	ctx := context.Background()
	res, err := c.st.Write(ctx, batches)
	if err != nil && len(reqs) > 1 && !errors.Is(err, store.ErrClosed) {
		// Nothing was committed (store.Write is atomic), so retrying is safe.
		for _, r := range reqs {
			c.write([]*request{r})
		}
		return
	}
	if err == nil && len(res.Batches) != len(reqs) {
		// A store breaking the per-batch contract; the conformance suite
		// catches this. The data is committed, so say so.
		err = fmt.Errorf("commit: store returned %d per-batch results for %d batches (the data was committed)", len(res.Batches), len(reqs))
	}
	for i, r := range reqs {
		if err != nil {
			r.err = err
		} else {
			r.res = res.Batches[i]
		}
		close(r.done)
	}
}
