package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// fixture: a DuckDB warehouse table of rows events, the real embedded
// store, and a scheduler over one import file (time_based, api-only).
type fixture struct {
	st    *duckstore.Store
	sched *Scheduler
	rows  int
}

func newFixture(t *testing.T, rows int, schedule string) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	whPath := filepath.Join(dir, "wh.duckdb")
	wh, err := sql.Open("duckdb", whPath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = wh.Exec(`CREATE TABLE ev AS SELECT i AS id, 'u' || i AS user_id,
		TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL 1 SECOND AS event_time,
		TIMESTAMP '2026-01-02 00:00:00' + (i // 1000) * INTERVAL 1 SECOND AS loaded_at FROM range(?) t(i)`, rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := duckstore.Open(ctx, filepath.Join(dir, "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	spec := fmt.Sprintf(`id: ev
project_id: 1
import_type: event_stream
sync_mode: time_based
source: {kind: duckdb, path: %q}
table_params: {table: ev}
event_name: e
time_column_name: event_time
user_column_name: user_id
insert_id_column_name: id
insert_time_column_name: loaded_at
schedule: %q
`, whPath, schedule)
	reg := kinds.Registry()
	im, err := importspec.Parse("ev.yaml", []byte(spec), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	projects := func(id int64) (importspec.Project, bool) {
		return importspec.Project{ID: id, Mode: config.IDSimplified}, id == 1
	}
	cat, err := NewCatalog(ctx, CatalogOptions{Store: st, Registry: reg, Projects: projects, Files: []*importspec.Import{im}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(cat, Options{Runner: &run.Runner{Registry: reg, Store: st}, Store: st})
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return &fixture{st: st, sched: s, rows: rows}
}

// wait polls the run until it is no longer RUNNING.
func (f *fixture) wait(t *testing.T, id string) store.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		runs, err := f.st.Runs(context.Background(), store.RunFilter{Project: 1, Import: "ev", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if r.ID == id && r.Status != store.RunRunning {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s still running after 60s", id)
	return store.Run{}
}

func (f *fixture) events(t *testing.T) int {
	t.Helper()
	n := 0
	if err := f.st.ScanEvents(context.Background(), store.Scan{Project: 1, ToMs: 1 << 62}, func(*store.Event) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// 50 simultaneous manual triggers make one run; all get its id.
func TestConcurrentTriggersMakeOneRun(t *testing.T) {
	f := newFixture(t, 50_000, "api")
	// Join for a minute, not 2s: on a loaded machine the run could finish and
	// the 2s pass before a late trigger goroutine runs, which would start a second run.
	f.sched.opt.JoinWindow = time.Minute
	if err := f.sched.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids, started := map[string]int{}, 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, ok, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerAPI, false)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[r.ID]++
			if ok {
				started++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(ids) != 1 || started != 1 {
		t.Fatalf("50 triggers: ids %v, %d started; want one run", ids, started)
	}
	for id := range ids {
		r := f.wait(t, id)
		if r.Status != store.RunSucceeded || r.Imported != int64(f.rows) || r.Trigger != TriggerAPI {
			t.Fatalf("run: %+v", r)
		}
	}
	if n := f.events(t); n != f.rows {
		t.Fatalf("%d events stored, want %d", n, f.rows)
	}
}

// The 6th API trigger within the hour is refused; a scheduled one is not.
func TestAPILimit(t *testing.T) {
	f := newFixture(t, 10, "api")
	f.sched.opt.JoinWindow = time.Millisecond // each trigger may start its own run
	for i := range 5 {
		r, ok, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerAPI, false)
		if err != nil || !ok {
			t.Fatalf("trigger %d: %v %v", i, ok, err)
		}
		f.wait(t, r.ID)
		time.Sleep(2 * time.Millisecond)
	}
	if _, _, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerAPI, false); !errors.Is(err, store.ErrRunLimit) {
		t.Fatalf("6th trigger: %v, want ErrRunLimit", err)
	}
	if _, ok, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerCLI, false); err != nil || !ok {
		t.Fatalf("a cli run is not limited: %v %v", ok, err)
	}
}

// A cron tick and a manual trigger of the same moment make one run, in
// either order; a second tick of the same period joins it too.
func TestTickAndTriggerMakeOneRun(t *testing.T) {
	f := newFixture(t, 10, "@every 1h")
	// A fixed mid-hour clock: the two ticks name the same period, and the
	// trigger joins within the window however slow the machine is.
	mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	f.sched.opt.Now = func() time.Time { return mid }
	f.sched.tick(1, "ev")
	r, ok, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerAPI, false)
	if err != nil || ok {
		t.Fatalf("trigger right after a tick: started=%v err=%v; want it to join", ok, err)
	}
	f.wait(t, r.ID)
	f.sched.tick(1, "ev")
	runs, _ := f.st.Runs(context.Background(), store.RunFilter{Project: 1, Import: "ev"})
	if len(runs) != 1 || runs[0].Trigger != TriggerSchedule {
		t.Fatalf("runs %+v; want the one scheduled run", runs)
	}
}

// Paused imports never run; a one_time import runs once.
func TestPausedAndOneTime(t *testing.T) {
	f := newFixture(t, 10, "api")
	paused := true
	if _, err := f.sched.Catalog().Patch(context.Background(), 1, "ev", &paused, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerAPI, false); !errors.Is(err, ErrPaused) {
		t.Fatalf("paused import triggered: %v", err)
	}
	f.sched.tick(1, "ev")
	if runs, _ := f.st.Runs(context.Background(), store.RunFilter{Project: 1}); len(runs) != 0 {
		t.Fatalf("a paused import ran on a tick: %+v", runs)
	}
}

// Stop cancels a run: its batch in flight commits with its watermark, the
// run is CANCELLED, and the next run resumes there; a RUNNING run left by
// a crash becomes FAILED at the next start.
func TestStopCancelsAndResumes(t *testing.T) {
	f := newFixture(t, 400_000, "api")
	r, _, err := f.sched.Trigger(context.Background(), 1, "ev", TriggerCLI, false)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if st, ok := f.sched.Progress(r.ID); ok && st.RowsRead > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := f.sched.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := f.wait(t, r.ID)
	if got.Status != store.RunCancelled || got.Imported == 0 || got.Imported >= int64(f.rows) {
		t.Fatalf("stopped run: %+v; want CANCELLED part-way", got)
	}
	// A crash: a RUNNING run nobody finishes.
	if _, _, err := f.st.StartRun(context.Background(), store.RunStart{Run: store.Run{ID: "ghost", Project: 1, Import: "ev", Trigger: "api", StartedMs: 1}}); err != nil {
		t.Fatal(err)
	}
	s2 := New(f.sched.Catalog(), Options{Runner: f.sched.opt.Runner, Store: f.st, JoinWindow: time.Millisecond})
	t.Cleanup(func() { _ = s2.Stop(context.Background()) })
	if err := s2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	runs, _ := f.st.Runs(context.Background(), store.RunFilter{Project: 1, Import: "ev"})
	if runs[len(runs)-1].ID != "ghost" || runs[len(runs)-1].Status != store.RunFailed {
		t.Fatalf("the crashed run: %+v", runs[len(runs)-1])
	}
	r2, _, err := s2.Trigger(context.Background(), 1, "ev", TriggerCLI, false)
	if err != nil {
		t.Fatal(err)
	}
	done := f.wait(t, r2.ID)
	if done.Status != store.RunSucceeded || done.Imported+got.Imported != int64(f.rows) {
		t.Fatalf("resumed run imported %d after %d; want %d in all (%+v)", done.Imported, got.Imported, f.rows, done)
	}
	if n := f.events(t); n != f.rows {
		t.Fatalf("%d events stored, want %d", n, f.rows)
	}
}
