package commit

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// recorder wraps a real store, recording the batches of every Write. While
// holds is non-zero (negative: forever), each Write announces itself on
// entered and waits for release, which lets tests line requests up behind a
// busy writer deterministically.
type recorder struct {
	store.Store
	entered  chan []store.Batch
	release  chan struct{}
	failProj int64 // a Write holding a batch of this project fails

	mu    sync.Mutex
	holds int
	calls [][]store.Batch
}

func (r *recorder) Write(ctx context.Context, batches []store.Batch) (store.WriteResult, error) {
	r.mu.Lock()
	r.calls = append(r.calls, batches)
	hold := r.holds != 0
	if r.holds > 0 {
		r.holds--
	}
	r.mu.Unlock()
	if hold {
		r.entered <- batches
		<-r.release
	}
	for _, b := range batches {
		if r.failProj != 0 && b.Project == r.failProj {
			return store.WriteResult{}, errors.New("injected: project rejected")
		}
	}
	return r.Store.Write(ctx, batches)
}

func (r *recorder) writes() [][]store.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]store.Batch(nil), r.calls...)
}

// setup opens a real duckstore in the test's temp dir, wrapped in a recorder.
func setup(t *testing.T, holds int) *recorder {
	t.Helper()
	st, err := duckstore.Open(context.Background(), filepath.Join(t.TempDir(), "c.duckdb"), duckstore.Options{MemoryLimit: "512MB", Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &recorder{Store: st, holds: holds, entered: make(chan []store.Batch), release: make(chan struct{})}
}

// result of one Commit, delivered on a channel.
type result struct {
	res store.WriteResult
	err error
}

func commitAsync(ctx context.Context, c *Committer, b store.Batch) <-chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := c.Commit(ctx, b)
		ch <- result{res, err}
	}()
	return ch
}

// waitQueued waits until n live requests are queued behind the writer.
func waitQueued(t *testing.T, c *Committer, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		live := 0
		for _, r := range c.queue {
			if !r.cancelled {
				live++
			}
		}
		c.mu.Unlock()
		if live == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d live requests, want %d", live, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func batch(project int64, n int, base int64) store.Batch {
	return store.Batch{Project: project, Events: storetest.GenEvents(project, n, base)}
}

func mustOK(t *testing.T, r result, inserted, duplicates int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("commit: %v", r.err)
	}
	if r.res.Inserted != inserted || r.res.Duplicates != duplicates {
		t.Fatalf("counts %d inserted / %d duplicates, want %d / %d", r.res.Inserted, r.res.Duplicates, inserted, duplicates)
	}
}
