package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// TestProcessesRunLeases: two stores on one schema are two processes. A
// run's lease held by one is left alone by the other's InterruptRuns (also
// at its start: no store interrupts a live run it does not own); once the
// lease lapses the other interrupts it, its owner's renewal no longer
// lists it, and a resume started by both at once starts once.
func TestProcessesRunLeases(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	start := func(s *testStore, id, owner string, untilMs int64) {
		t.Helper()
		r := store.Run{ID: id, Project: 1, Import: "imp-" + id, Trigger: "schedule", StartedMs: 1000, Owner: owner, LeaseUntilMs: untilMs}
		if _, ok, err := s.StartRun(ctx, store.RunStart{Run: r}); err != nil || !ok {
			t.Fatalf("start %s: %v %v", id, ok, err)
		}
	}
	start(a, "x", "proc-a", 10_000)
	start(a, "y", "proc-a", 10_000)
	// b restarting: a's runs are live, whichever store asks.
	if runs, err := b.InterruptRuns(ctx, "interrupted: the server stopped during the run", 5_000); err != nil || len(runs) != 0 {
		t.Fatalf("b interrupted a's live runs: %+v %v", runs, err)
	}
	if ids, err := a.RenewRuns(ctx, "proc-a", 20_000); err != nil || fmt.Sprint(ids) != "[x y]" && fmt.Sprint(ids) != "[y x]" {
		t.Fatalf("a renewed %v (%v)", ids, err)
	}
	if runs, err := b.InterruptRuns(ctx, "interrupted: lease expired", 15_000); err != nil || len(runs) != 0 {
		t.Fatalf("b interrupted renewed runs: %+v %v", runs, err)
	}
	// Only x's lease moves on (as if y's renewals stopped reaching the
	// database); b takes y once its lease lapsed.
	if _, err := a.pool.Exec(ctx, `UPDATE sync_runs SET lease_until_ms = 30000 WHERE id = 'x'`); err != nil {
		t.Fatal(err)
	}
	runs, err := b.InterruptRuns(ctx, "interrupted: lease expired", 25_000)
	if err != nil || len(runs) != 1 || runs[0].ID != "y" || runs[0].Owner != "proc-a" || runs[0].Status != store.RunFailed {
		t.Fatalf("b at 25000: %+v %v; want y", runs, err)
	}
	if ids, err := a.RenewRuns(ctx, "proc-a", 40_000); err != nil || fmt.Sprint(ids) != "[x]" {
		t.Fatalf("a renewed %v after losing y (%v); want [x]", ids, err)
	}
	// Both resume y at once (the one InterruptRuns answered would, but a
	// duplicate must still make one run): one starts, the other joins it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	started := 0
	for i, s := range []*testStore{a, b, a, b} {
		wg.Go(func() {
			r := store.Run{ID: fmt.Sprintf("y-resume-%d", i), Project: 1, Import: "imp-y", Trigger: "recovery",
				Period: "resume:y", StartedMs: 26_000, Owner: fmt.Sprintf("proc-%d", i), LeaseUntilMs: 60_000}
			_, ok, err := s.StartRun(ctx, store.RunStart{Run: r, JoinWithinMs: 2000})
			if err != nil {
				t.Errorf("resume: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				started++
			}
		})
	}
	wg.Wait()
	if started != 1 {
		t.Fatalf("%d resumes started, want 1", started)
	}
}

// TestProcessesReapOnce: two stores reaping the same expired runs at once
// get each of them exactly once between them.
func TestProcessesReapOnce(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	const n = 30
	for i := range n {
		r := store.Run{ID: fmt.Sprintf("r%02d", i), Project: 1, Import: fmt.Sprintf("imp%02d", i), Trigger: "api",
			StartedMs: 1, Owner: "dead", LeaseUntilMs: 100}
		if _, ok, err := a.StartRun(ctx, store.RunStart{Run: r}); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var got []string
	for i := range 8 {
		s := []*testStore{a, b}[i%2]
		wg.Go(func() {
			runs, err := s.InterruptRuns(ctx, "interrupted: lease expired", 1000)
			if err != nil {
				t.Errorf("interrupt: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs {
				got = append(got, r.ID)
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	if len(got) != n || len(slices.Compact(slices.Clone(got))) != n {
		t.Fatalf("reaped %d (%v), want each of %d runs once", len(got), got, n)
	}
}

// TestTakenOverRunCannotWrite: once another process interrupted a run
// whose lease lapsed, the stalled owner's next writes for it (records
// with a checkpoint, full-sync ownership) are refused with ErrRunEnded and
// leave nothing behind; a live run and unrecorded ids write as usual.
func TestTakenOverRunCannotWrite(t *testing.T) {
	a, b := openPair(t)
	ctx := context.Background()
	for _, id := range []string{"live", "stalled"} {
		r := store.Run{ID: id, Project: 1, Import: "imp-" + id, Trigger: "schedule", StartedMs: 1000, Owner: "proc-a", LeaseUntilMs: 10_000}
		if _, ok, err := a.StartRun(ctx, store.RunStart{Run: r}); err != nil || !ok {
			t.Fatalf("start %s: %v %v", id, ok, err)
		}
	}
	if _, err := a.pool.Exec(ctx, `UPDATE sync_runs SET lease_until_ms = 90000 WHERE id = 'live'`); err != nil {
		t.Fatal(err)
	}
	if runs, err := b.InterruptRuns(ctx, "interrupted: lease expired", 20_000); err != nil || len(runs) != 1 || runs[0].ID != "stalled" {
		t.Fatalf("interrupt: %+v %v", runs, err)
	}
	write := func(runID, imp string) error {
		ev := store.Event{Name: "e", DistinctID: "u", TimeMs: 1_700_000_000_000, InsertID: "i-" + runID, Props: []byte(`{}`), IngestMs: 1_700_000_000_000}
		ev.Key = store.DedupKey(1, ev.Name, ev.DistinctID, ev.TimeMs, ev.InsertID)
		_, err := a.Write(ctx, []store.Batch{{Project: 1, RunID: runID, Events: []store.Event{ev},
			Checkpoint: &store.Checkpoint{Import: imp, Value: []byte("w-" + runID)}}})
		return err
	}
	if err := write("stalled", "imp-stalled"); !errors.Is(err, store.ErrRunEnded) {
		t.Fatalf("write of the taken-over run: %v, want ErrRunEnded", err)
	}
	if ck, err := a.Checkpoint(ctx, 1, "imp-stalled"); err != nil || ck != nil {
		t.Fatalf("the refused write left a checkpoint %q (%v)", ck, err)
	}
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused write left %d events (%v)", n, err)
	}
	m := []store.Member{{MemberKey: store.MemberKey{ID: "u"}, Names: []string{"plan"}}}
	if err := a.TrackMembers(ctx, 1, "imp-stalled", "stalled", m); !errors.Is(err, store.ErrRunEnded) {
		t.Fatalf("track members of the taken-over run: %v, want ErrRunEnded", err)
	}
	if err := a.SettleMembers(ctx, 1, "imp-stalled", "stalled"); !errors.Is(err, store.ErrRunEnded) {
		t.Fatalf("settle members of the taken-over run: %v, want ErrRunEnded", err)
	}
	for _, id := range []string{"live", "not-a-recorded-run"} {
		if err := write(id, "imp-"+id); err != nil {
			t.Fatalf("write of %s: %v", id, err)
		}
		if err := a.TrackMembers(ctx, 1, "imp-"+id, id, m); err != nil {
			t.Fatalf("track members of %s: %v", id, err)
		}
	}
}
