package commit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

func TestCoalescesWhileWriterBusy(t *testing.T) {
	rec := setup(t, -1)
	c := New(rec, Options{})
	defer c.Close()
	ctx := context.Background()

	first := commitAsync(ctx, c, batch(1, 5, 0))
	if got := <-rec.entered; len(got) != 1 {
		t.Fatalf("first transaction has %d batches, want 1", len(got))
	}
	var waiting []<-chan result
	for i := range 10 {
		waiting = append(waiting, commitAsync(ctx, c, batch(1, 5, int64(100*(i+1)))))
	}
	waitQueued(t, c, 10)
	rec.release <- struct{}{}
	mustOK(t, <-first, 5, 0)
	if got := <-rec.entered; len(got) != 10 {
		t.Fatalf("second transaction has %d batches, want all 10 queued ones", len(got))
	}
	rec.release <- struct{}{}
	for _, w := range waiting {
		mustOK(t, <-w, 5, 0)
	}
	if n := len(rec.writes()); n != 2 {
		t.Fatalf("%d store writes for 11 commits, want 2", n)
	}
}

func TestMaxEventsSplitsTransactions(t *testing.T) {
	rec := setup(t, -1)
	c := New(rec, Options{MaxEvents: 100})
	defer c.Close()
	ctx := context.Background()
	first := commitAsync(ctx, c, batch(1, 1, 0))
	<-rec.entered
	var waiting []<-chan result
	for i := range 7 {
		waiting = append(waiting, commitAsync(ctx, c, batch(1, 30, int64(1000*(i+1)))))
		waitQueued(t, c, i+1) // keep arrival order known
	}
	big := commitAsync(ctx, c, batch(1, 250, 100_000)) // bigger than the cap: alone
	waitQueued(t, c, 8)
	rec.release <- struct{}{}
	mustOK(t, <-first, 1, 0)
	for _, want := range []int{3, 3, 1, 1} {
		got := <-rec.entered
		if len(got) != want {
			t.Fatalf("transaction has %d batches, want %d", len(got), want)
		}
		rec.release <- struct{}{}
	}
	for _, w := range waiting {
		mustOK(t, <-w, 30, 0)
	}
	mustOK(t, <-big, 250, 0)
}

// TestPerBatchCounts checks that each caller learns its own counts even
// when its duplicates are decided by another caller's batch in the same
// transaction.
func TestPerBatchCounts(t *testing.T) {
	rec := setup(t, -1)
	c := New(rec, Options{})
	defer c.Close()
	ctx := context.Background()
	a := batch(1, 3, 0)
	b := store.Batch{Project: 1, Events: append(append([]store.Event(nil), a.Events[:2]...), storetest.GenEvents(1, 1, 50)...)}
	merge := store.Batch{Project: 1, Merges: []store.Merge{{DistinctIDs: [2]string{"x", "y"}, Props: []byte(`{}`)}}}

	first := commitAsync(ctx, c, batch(1, 1, 900))
	<-rec.entered
	ra := commitAsync(ctx, c, a)
	waitQueued(t, c, 1)
	rb := commitAsync(ctx, c, b)
	waitQueued(t, c, 2)
	rm := commitAsync(ctx, c, merge)
	waitQueued(t, c, 3)
	rec.release <- struct{}{}
	<-rec.entered
	rec.release <- struct{}{}
	mustOK(t, <-first, 1, 0)
	mustOK(t, <-ra, 3, 0)
	mustOK(t, <-rb, 1, 2)
	m := <-rm
	mustOK(t, m, 0, 0)
	if m.res.Merges != 1 {
		t.Fatalf("merge batch reports %d merges, want 1", m.res.Merges)
	}
}

func TestCancelBeforePickupWithdraws(t *testing.T) {
	rec := setup(t, -1)
	c := New(rec, Options{})
	defer c.Close()
	first := commitAsync(context.Background(), c, batch(1, 1, 0))
	<-rec.entered
	ctx, cancel := context.WithCancel(context.Background())
	withdrawn := batch(1, 4, 500)
	pending := commitAsync(ctx, c, withdrawn)
	waitQueued(t, c, 1)
	cancel()
	if r := <-pending; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled commit returned %v, want context.Canceled", r.err)
	}
	later := commitAsync(context.Background(), c, batch(1, 2, 900))
	rec.release <- struct{}{}
	mustOK(t, <-first, 1, 0)
	got := <-rec.entered
	rec.release <- struct{}{}
	mustOK(t, <-later, 2, 0)
	if len(got) != 1 || len(got[0].Events) != 2 {
		t.Fatalf("the withdrawn batch reached the store: %d batches", len(got))
	}
	if evs := storetest.Collect(t, rec.Store, store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 40}); len(evs) != 3 {
		t.Fatalf("stored %d events, want 3 (withdrawn batch excluded)", len(evs))
	}
	if _, err := c.Commit(ctx, batch(1, 1, 7000)); !errors.Is(err, context.Canceled) {
		t.Fatalf("commit with a done context: %v", err)
	}
}

func TestCancelAfterPickupWaitsForOutcome(t *testing.T) {
	rec := setup(t, -1)
	c := New(rec, Options{})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pending := commitAsync(ctx, c, batch(1, 3, 0))
	<-rec.entered // picked up: the transaction is under way
	cancel()
	select {
	case r := <-pending:
		t.Fatalf("commit returned (%v) before its transaction finished", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	rec.release <- struct{}{}
	mustOK(t, <-pending, 3, 0) // committed: the caller must hear success
}

func TestCloseDrainsThenRefuses(t *testing.T) {
	rec := setup(t, -1)
	c := New(rec, Options{})
	ctx := context.Background()
	first := commitAsync(ctx, c, batch(1, 1, 0))
	<-rec.entered
	var queued []<-chan result
	for i := range 5 {
		queued = append(queued, commitAsync(ctx, c, batch(1, 2, int64(100*(i+1)))))
	}
	waitQueued(t, c, 5)
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	for {
		c.mu.Lock()
		done := c.closed
		c.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Commit(ctx, batch(1, 1, 9000)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("commit during Close: %v, want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a transaction was in flight")
	case <-time.After(20 * time.Millisecond):
	}
	rec.release <- struct{}{}
	<-rec.entered // the queued five, drained in one transaction
	rec.release <- struct{}{}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	mustOK(t, <-first, 1, 0)
	for _, q := range queued {
		mustOK(t, <-q, 2, 0)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.Commit(ctx, batch(1, 1, 9000)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("commit after Close: %v, want ErrClosed", err)
	}
}

// TestFailureIsolation: a batch the store rejects fails its own caller
// only, although it shared a transaction with good ones.
func TestFailureIsolation(t *testing.T) {
	rec := setup(t, 2) // hold the first transaction and the shared one
	rec.failProj = 666
	c := New(rec, Options{})
	defer c.Close()
	ctx := context.Background()
	first := commitAsync(ctx, c, batch(1, 1, 0))
	<-rec.entered
	good1 := commitAsync(ctx, c, batch(1, 2, 100))
	waitQueued(t, c, 1)
	bad := commitAsync(ctx, c, batch(666, 2, 100))
	waitQueued(t, c, 2)
	good2 := commitAsync(ctx, c, batch(2, 2, 100))
	waitQueued(t, c, 3)
	rec.release <- struct{}{}
	if got := <-rec.entered; len(got) != 3 {
		t.Fatalf("shared transaction has %d batches, want 3", len(got))
	}
	rec.release <- struct{}{} // it fails; the three retries run unheld
	mustOK(t, <-first, 1, 0)
	mustOK(t, <-good1, 2, 0)
	mustOK(t, <-good2, 2, 0)
	if r := <-bad; r.err == nil || r.err.Error() != "injected: project rejected" {
		t.Fatalf("rejected batch: %v", r.err)
	}
	if n := len(storetest.Collect(t, rec.Store, store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 40})); n != 3 {
		t.Fatalf("project 1 holds %d events, want 3", n)
	}
}

func TestMaxDelayGathers(t *testing.T) {
	rec := setup(t, 0)
	// A long MaxDelay so a stalled test goroutine on a loaded machine cannot
	// let a's delay run out (and a be written alone) before b arrives.
	c := New(rec, Options{MaxDelay: time.Second})
	defer c.Close()
	ctx := context.Background()
	start := time.Now()
	a := commitAsync(ctx, c, batch(1, 2, 0))
	waitQueued(t, c, 1) // b arrives after a
	b := commitAsync(ctx, c, batch(1, 2, 100))
	mustOK(t, <-a, 2, 0)
	mustOK(t, <-b, 2, 0)
	if took := time.Since(start); took < 950*time.Millisecond {
		t.Fatalf("first commit returned after %v, before MaxDelay", took)
	}
	if w := rec.writes(); len(w) != 1 || len(w[0]) != 2 {
		t.Fatalf("writes = %d, want one with both batches", len(w))
	}
}

func TestConcurrentCommitsAgainstDuckstore(t *testing.T) {
	rec := setup(t, 0)
	c := New(rec, Options{MaxEvents: 2000})
	const callers, rounds, own, shared = 32, 25, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, callers*rounds)
	var mu sync.Mutex
	sharedInserted := 0
	for g := range callers {
		wg.Go(func() {
			for i := range rounds {
				// own events are unique to this call; one repeats inside the
				// batch; the shared ones are sent by every caller in round i.
				evs := storetest.GenEvents(1, own, int64(g*1_000_000+i*1000))
				evs = append(evs, evs[0])
				evs = append(evs, storetest.GenEvents(1, shared, int64(-1_000_000-i*1000))...)
				res, err := c.Commit(context.Background(), store.Batch{Project: 1, Events: evs})
				if err == nil && (res.Inserted < own || res.Inserted > own+shared || res.Inserted+res.Duplicates != len(evs)) {
					err = fmt.Errorf("caller %d round %d: counts %+v", g, i, res)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sharedInserted += res.Inserted - own
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if sharedInserted != rounds*shared {
		t.Fatalf("shared events inserted %d times in total, want %d", sharedInserted, rounds*shared)
	}
	got := storetest.Collect(t, rec.Store, store.Scan{Project: 1, FromMs: -1 << 40, ToMs: 1 << 40})
	seen := map[store.Key]bool{}
	for _, e := range got {
		if seen[e.Key] {
			t.Fatalf("event %s stored twice", e.InsertID)
		}
		seen[e.Key] = true
	}
	if want := callers*rounds*own + rounds*shared; len(got) != want {
		t.Fatalf("stored %d events, want %d", len(got), want)
	}
	w := rec.writes()
	t.Logf("%d commits became %d store writes", callers*rounds, len(w))
	if len(w) >= callers*rounds {
		t.Fatalf("no coalescing: %d writes for %d commits", len(w), callers*rounds)
	}
}
