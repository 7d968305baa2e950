package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// leasedRun starts a run of imp owned by owner with a lease until untilMs.
func leasedRun(t *testing.T, s store.Store, id, imp, owner string, untilMs int64) store.Run {
	t.Helper()
	r := newRun(id, imp, "schedule", 1000)
	r.Owner, r.LeaseUntilMs = owner, untilMs
	got, ok := startRun(t, s, store.RunStart{Run: r})
	if !ok || got.Owner != owner || got.LeaseUntilMs != untilMs || got.Status != store.RunRunning {
		t.Fatalf("start %s: %+v started=%v; want RUNNING, owner %s, lease %d", id, got, ok, owner, untilMs)
	}
	return got
}

func renew(t *testing.T, s store.Store, owner string, untilMs int64) []string {
	t.Helper()
	ids, err := s.RenewRuns(context.Background(), owner, untilMs)
	if err != nil {
		t.Fatalf("renew %s: %v", owner, err)
	}
	slices.Sort(ids)
	return ids
}

func interrupt(t *testing.T, s store.Store, reason string, nowMs int64) []store.Run {
	t.Helper()
	runs, err := s.InterruptRuns(context.Background(), reason, nowMs)
	if err != nil {
		t.Fatalf("interrupt at %d: %v", nowMs, err)
	}
	slices.SortFunc(runs, func(a, b store.Run) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return runs
}

func runIDs(runs []store.Run) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return ids
}

func runStatus(t *testing.T, s store.Store, imp, id string) store.Run {
	t.Helper()
	runs, err := s.Runs(context.Background(), store.RunFilter{Project: 1, Import: imp, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("run %s of %s not in the history", id, imp)
	return store.Run{}
}

// testRunLeases: a running run carries its owner's lease; RenewRuns
// extends the owner's running runs only and lists them; InterruptRuns
// fails exactly the runs whose lease lapsed, once, and leaves a live lease
// (and its run's updates) alone.
func testRunLeases(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	leasedRun(t, hd.s, "a", "imp-a", "p1", 10_000)
	leasedRun(t, hd.s, "b", "imp-b", "p1", 10_000)
	leasedRun(t, hd.s, "c", "imp-c", "p2", 10_000)
	if r := runStatus(t, hd.s, "imp-a", "a"); r.Owner != "p1" || r.LeaseUntilMs != 10_000 {
		t.Fatalf("history of a leased run: %+v", r)
	}
	if got := interrupt(t, hd.s, "interrupted: lease expired", 9_999); len(got) != 0 {
		t.Fatalf("live leases interrupted: %v", runIDs(got))
	}
	if ids := renew(t, hd.s, "p1", 30_000); fmt.Sprint(ids) != "[a b]" {
		t.Fatalf("p1 renewed %v, want [a b]", ids)
	}
	if ids := renew(t, hd.s, "", 1<<62); len(ids) != 0 {
		t.Fatalf("an empty owner renewed %v", ids)
	}
	if ids := renew(t, hd.s, "nobody", 1<<62); len(ids) != 0 {
		t.Fatalf("an owner without runs renewed %v", ids)
	}
	// p2's lease lapsed at 10 000, p1's holds until 30 000.
	got := interrupt(t, hd.s, "interrupted: lease expired", 20_000)
	if len(got) != 1 || got[0].ID != "c" || got[0].Status != store.RunFailed ||
		got[0].Reason != "interrupted: lease expired" || got[0].EndedMs != 20_000 || got[0].Import != "imp-c" || got[0].Owner != "p2" {
		t.Fatalf("interrupt at 20000: %+v; want run c FAILED", got)
	}
	if again := interrupt(t, hd.s, "interrupted: lease expired", 20_000); len(again) != 0 {
		t.Fatalf("interrupted twice: %v", runIDs(again))
	}
	if r := runStatus(t, hd.s, "imp-c", "c"); r.Status != store.RunFailed || r.Reason != "interrupted: lease expired" {
		t.Fatalf("interrupted run in the history: %+v", r)
	}
	for _, id := range []string{"a", "b"} {
		if r := runStatus(t, hd.s, "imp-"+id, id); r.Status != store.RunRunning || r.LeaseUntilMs != 30_000 {
			t.Fatalf("run %s with a live lease: %+v", id, r)
		}
	}
	// The owner of an interrupted run can no longer save it or renew it.
	c := runStatus(t, hd.s, "imp-c", "c")
	c.Status, c.EndedMs = store.RunSucceeded, 21_000
	if err := hd.s.UpdateRun(ctx, c); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finishing an interrupted run: %v, want ErrNotFound", err)
	}
	if ids := renew(t, hd.s, "p2", 40_000); len(ids) != 0 {
		t.Fatalf("p2 renewed %v after losing its run", ids)
	}
	// The interrupted run no longer blocks its import: a resume starts.
	r := newRun("c2", "imp-c", "recovery", 21_000)
	r.Period, r.Owner, r.LeaseUntilMs = "resume:c", "p3", 100_000
	if got, ok := startRun(t, hd.s, store.RunStart{Run: r, JoinWithinMs: 2000}); !ok {
		t.Fatalf("resume of an interrupted run joined %s", got.ID)
	}
	// A progress update keeps the lease; a finished run is not renewed.
	a := runStatus(t, hd.s, "imp-a", "a")
	a.RowsRead = 5
	if err := hd.s.UpdateRun(ctx, a); err != nil {
		t.Fatal(err)
	}
	if r := runStatus(t, hd.s, "imp-a", "a"); r.RowsRead != 5 || r.Owner != "p1" || r.LeaseUntilMs != 30_000 {
		t.Fatalf("progress update changed the lease: %+v", r)
	}
	finish(t, hd.s, a, 25_000)
	if ids := renew(t, hd.s, "p1", 40_000); fmt.Sprint(ids) != "[b]" {
		t.Fatalf("p1 renewed %v after a finished, want [b]", ids)
	}
	if got := interrupt(t, hd.s, "interrupted: lease expired", 50_000); fmt.Sprint(runIDs(got)) != "[b]" {
		t.Fatalf("interrupt at 50000: %v, want [b] (c2's lease holds)", runIDs(got))
	}
	if r := runStatus(t, hd.s, "imp-a", "a"); r.Status != store.RunSucceeded {
		t.Fatalf("a finished run was interrupted: %+v", r)
	}
}

// testRunLeasesReapOnce: callers interrupting at once get each expired
// run exactly once between them, so only one of them resumes it.
func testRunLeasesReapOnce(t *testing.T, h Harness) {
	hd := open(t, h)
	const n = 20
	for i := range n {
		leasedRun(t, hd.s, fmt.Sprintf("r%02d", i), fmt.Sprintf("imp%02d", i), "dead", 1000)
	}
	leasedRun(t, hd.s, "live", "imp-live", "alive", 1<<62)
	var mu sync.Mutex
	var wg sync.WaitGroup
	seen := map[string]int{}
	for range 8 {
		wg.Go(func() {
			runs, err := hd.s.InterruptRuns(context.Background(), "interrupted: lease expired", 5000)
			if err != nil {
				t.Errorf("interrupt: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs {
				seen[r.ID]++
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d runs interrupted, want %d: %v", len(seen), n, seen)
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("run %s returned to %d callers", id, k)
		}
	}
	if r := runStatus(t, hd.s, "imp-live", "live"); r.Status != store.RunRunning {
		t.Fatalf("the live run: %+v", r)
	}
}
