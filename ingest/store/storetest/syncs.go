package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func checkpointOf(t *testing.T, s store.Store, project int64, id string) string {
	t.Helper()
	v, err := s.Checkpoint(context.Background(), project, id)
	if err != nil {
		t.Fatalf("checkpoint %s: %v", id, err)
	}
	return string(v)
}

// testCheckpoints: a checkpoint commits with its batch, also when the
// batch stores nothing new, survives a restart, and an empty value clears it.
func testCheckpoints(t *testing.T, h Harness) {
	hd := open(t, h)
	if got := checkpointOf(t, hd.s, 1, "imp"); got != "" {
		t.Fatalf("fresh store has checkpoint %q", got)
	}
	evs := GenEvents(1, 10, 0)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs, Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w1")}})
	if got := checkpointOf(t, hd.s, 1, "imp"); got != "w1" {
		t.Fatalf("checkpoint after write = %q, want w1", got)
	}
	// Only duplicates: the checkpoint still moves (the rows were seen).
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs, Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w2")}})
	if res.Inserted != 0 || res.Duplicates != 10 {
		t.Fatalf("rewrite: %+v", res)
	}
	mustWrite(t, hd.s, store.Batch{Project: 2, Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("other")}})
	if got := checkpointOf(t, hd.s, 1, "imp"); got != "w2" {
		t.Fatalf("checkpoint = %q, want w2 (project 2's must not leak)", got)
	}
	hd.reopen(t)
	if got := checkpointOf(t, hd.s, 1, "imp"); got != "w2" {
		t.Fatalf("checkpoint after reopen = %q, want w2", got)
	}
	if got := checkpointOf(t, hd.s, 2, "imp"); got != "other" {
		t.Fatalf("project 2 checkpoint after reopen = %q", got)
	}
	mustWrite(t, hd.s, store.Batch{Project: 1, Checkpoint: &store.Checkpoint{Import: "imp"}})
	hd.reopen(t)
	if got := checkpointOf(t, hd.s, 1, "imp"); got != "" {
		t.Fatalf("cleared checkpoint = %q", got)
	}
}

func newRun(id, imp, trigger string, startedMs int64) store.Run {
	return store.Run{ID: id, Project: 1, Import: imp, Trigger: trigger, StartedMs: startedMs}
}

func startRun(t *testing.T, s store.Store, rs store.RunStart) (store.Run, bool) {
	t.Helper()
	r, started, err := s.StartRun(context.Background(), rs)
	if err != nil {
		t.Fatalf("start run %s: %v", rs.Run.ID, err)
	}
	return r, started
}

func finish(t *testing.T, s store.Store, r store.Run, endedMs int64) {
	t.Helper()
	r.Status, r.EndedMs = store.RunSucceeded, endedMs
	if err := s.UpdateRun(context.Background(), r); err != nil {
		t.Fatalf("finish %s: %v", r.ID, err)
	}
}

// testRunsOnePerImport: one running run per import; a period or a join
// window makes later starts join an earlier run even after it finished.
func testRunsOnePerImport(t *testing.T, h Harness) {
	hd := open(t, h)
	a, ok := startRun(t, hd.s, store.RunStart{Run: newRun("a", "imp", "schedule", 1000)})
	if !ok || a.Status != store.RunRunning {
		t.Fatalf("first start: %+v %v", a, ok)
	}
	if got, ok := startRun(t, hd.s, store.RunStart{Run: newRun("b", "imp", "api", 2000)}); ok || got.ID != "a" {
		t.Fatalf("start during a run: got %s started=%v, want a, false", got.ID, ok)
	}
	if _, ok := startRun(t, hd.s, store.RunStart{Run: newRun("c", "other", "api", 2000)}); !ok {
		t.Fatal("another import must start")
	}
	finish(t, hd.s, a, 3000)
	if err := hd.s.UpdateRun(context.Background(), store.Run{ID: "a", Status: store.RunFailed}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("updating a finished run: %v, want ErrNotFound", err)
	}
	p := newRun("p1", "imp", "schedule", 10_000)
	p.Period = "2026-11-22T10:00"
	p1, ok := startRun(t, hd.s, store.RunStart{Run: p})
	if !ok {
		t.Fatal("period run must start")
	}
	finish(t, hd.s, p1, 11_000)
	p.ID, p.StartedMs = "p2", 50_000
	if got, ok := startRun(t, hd.s, store.RunStart{Run: p}); ok || got.ID != "p1" {
		t.Fatalf("same period again: %s %v, want p1 joined", got.ID, ok)
	}
	if got, ok := startRun(t, hd.s, store.RunStart{Run: newRun("j", "imp", "api", 11_500), JoinWithinMs: 2000}); ok || got.ID != "p1" {
		t.Fatalf("within the join window: %s %v, want p1 joined", got.ID, ok)
	}
	k, ok := startRun(t, hd.s, store.RunStart{Run: newRun("k", "imp", "api", 60_000), JoinWithinMs: 2000})
	if !ok {
		t.Fatal("after the join window a run must start")
	}
	k.Status, k.EndedMs = store.RunFailed, 60_001
	if err := hd.s.UpdateRun(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if got, ok := startRun(t, hd.s, store.RunStart{Run: newRun("retry", "imp", "api", 60_500), JoinWithinMs: 2000}); !ok {
		t.Fatalf("a failed run was joined (%s): a retry must start", got.ID)
	}
}

// testRunsConcurrentStart: simultaneous starts make exactly one run.
func testRunsConcurrentStart(t *testing.T, h Harness) {
	hd := open(t, h)
	var wg sync.WaitGroup
	var mu sync.Mutex
	started, ids := 0, map[string]bool{}
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, ok, err := hd.s.StartRun(context.Background(), store.RunStart{Run: newRun(fmt.Sprintf("r%d", i), "imp", "api", 1000), JoinWithinMs: 2000, LimitPerHour: 5})
			if err != nil {
				t.Errorf("start %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[r.ID] = true
			if ok {
				started++
			}
		}()
	}
	wg.Wait()
	if started != 1 || len(ids) != 1 {
		t.Fatalf("50 concurrent starts: %d started, ids %v; want one run", started, ids)
	}
}

// testRunsLimit: the hourly limit counts runs of one trigger.
func testRunsLimit(t *testing.T, h Harness) {
	hd := open(t, h)
	const hour = 3_600_000
	for i := range 5 {
		r, ok := startRun(t, hd.s, store.RunStart{Run: newRun(fmt.Sprintf("api%d", i), "imp", "api", int64(i)*10_000), LimitPerHour: 5})
		if !ok {
			t.Fatalf("run %d did not start", i)
		}
		finish(t, hd.s, r, int64(i)*10_000+1)
	}
	_, _, err := hd.s.StartRun(context.Background(), store.RunStart{Run: newRun("api5", "imp", "api", 60_000), LimitPerHour: 5})
	if !errors.Is(err, store.ErrRunLimit) {
		t.Fatalf("6th api run within the hour: %v, want ErrRunLimit", err)
	}
	if _, ok := startRun(t, hd.s, store.RunStart{Run: newRun("sched", "imp", "schedule", 70_000)}); !ok {
		t.Fatal("a scheduled run is not limited by api runs")
	}
	if _, ok := startRun(t, hd.s, store.RunStart{Run: newRun("other", "imp2", "api", 70_000), LimitPerHour: 5}); !ok {
		t.Fatal("the limit is per import")
	}
	runs, err := hd.s.Runs(context.Background(), store.RunFilter{Project: 1, Import: "imp"})
	if err != nil {
		t.Fatal(err)
	}
	finish(t, hd.s, runs[0], 80_000)
	if _, ok := startRun(t, hd.s, store.RunStart{Run: newRun("later", "imp", "api", hour+10_001), LimitPerHour: 5}); !ok {
		t.Fatal("an hour after the first api run another must start")
	}
}

// testRunsHistory: newest first, progress and failures kept, interrupted
// runs marked FAILED, all across a restart.
func testRunsHistory(t *testing.T, h Harness) {
	hd := open(t, h)
	for i := range 4 {
		r, _ := startRun(t, hd.s, store.RunStart{Run: newRun(fmt.Sprintf("r%d", i), "imp", "schedule", int64(i+1)*1000)})
		if i < 3 {
			r.RowsRead, r.Imported, r.Failed, r.Bytes = 10, 9, 1, 100
			r.Failures = []byte(`[{"row":3,"field":"time","message":"bad"}]`)
			finish(t, hd.s, r, int64(i+1)*1000+500)
		}
	}
	hd.reopen(t)
	got, err := hd.s.InterruptRuns(context.Background(), "interrupted", 9000)
	if err != nil || len(got) != 1 || got[0].ID != "r3" || got[0].Status != store.RunFailed {
		t.Fatalf("interrupt: %+v %v, want r3 FAILED", got, err)
	}
	runs, err := hd.s.Runs(context.Background(), store.RunFilter{Project: 1, Import: "imp"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 || runs[0].ID != "r3" || runs[3].ID != "r0" {
		t.Fatalf("history order: %+v", runs)
	}
	if runs[0].Status != store.RunFailed || runs[0].Reason != "interrupted" || runs[0].EndedMs != 9000 {
		t.Fatalf("interrupted run: %+v", runs[0])
	}
	r := runs[1]
	if r.Status != store.RunSucceeded || r.RowsRead != 10 || r.Imported != 9 || r.Failed != 1 || r.Bytes != 100 ||
		string(r.Failures) != `[{"row":3,"field":"time","message":"bad"}]` || r.EndedMs != 3500 {
		t.Fatalf("finished run: %+v", r)
	}
	if runs, _ := hd.s.Runs(context.Background(), store.RunFilter{Project: 1, Limit: 2}); len(runs) != 2 {
		t.Fatalf("limit 2: %d runs", len(runs))
	}
	if runs, _ := hd.s.Runs(context.Background(), store.RunFilter{Project: 2}); len(runs) != 0 {
		t.Fatalf("project 2 sees %d runs of project 1", len(runs))
	}
}

// testImportDocs: documents are stored, replaced, deleted, and kept.
func testImportDocs(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	put := func(d store.ImportDoc) {
		if err := hd.s.PutImportDoc(ctx, d); err != nil {
			t.Fatalf("put %s: %v", d.ID, err)
		}
	}
	put(store.ImportDoc{Project: 1, ID: "a", Doc: []byte(`{"v":1}`)})
	put(store.ImportDoc{Project: 1, ID: "b", Doc: []byte(`{"v":1}`)})
	put(store.ImportDoc{Project: 2, ID: "a", Doc: []byte(`{"v":3}`)})
	put(store.ImportDoc{Project: 1, ID: "a", Doc: []byte(`{"v":2}`)})
	put(store.ImportDoc{Project: 1, ID: "b"})
	hd.reopen(t)
	docs, err := hd.s.ImportDocs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(len(docs))
	for _, d := range docs {
		got += fmt.Sprintf(" %d/%s=%s", d.Project, d.ID, d.Doc)
	}
	if got != `2 1/a={"v":2} 2/a={"v":3}` {
		t.Fatalf("docs: %s", got)
	}
}
