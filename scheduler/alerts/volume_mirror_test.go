package alerts_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/run"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/scheduler"
	"github.com/tributary-dev/tributary/scheduler/alerts"
)

// The volume rule compares a Mirror import's runs by the table's rows,
// whether a run diffed the table (rows read = the table) or a change
// feed served it (rows read = the changes): a table of 100 rows stays in
// band after many feed runs of 2 changes, and a truncated one is held.
func TestMirrorVolumeLikeWithLike(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg, err := config.Parse("test.yaml", []byte(`
projects:
  - id: 1
    name: Shop
    token: tok12345678
    api_secret: sec12345678
    alerts:
      destinations:
        - {name: hook, kind: webhook, url: "${HOOK_URL}"}
      rules:
        volume: {min_runs: 3, action: pause}
`), func(k string) (string, bool) { return "http://127.0.0.1:9/alerts", k == "HOOK_URL" })
	if err != nil {
		t.Fatal(err)
	}
	st, err := duckstore.Open(ctx, filepath.Join(dir, "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := kinds.Registry()
	im, err := importspec.Parse("m.yaml", []byte(fmt.Sprintf(`id: m
project_id: 1
import_type: event_stream
sync_mode: mirror
source: {kind: duckdb, path: %q}
table_params: {table: ev}
event_name: e
time_column_name: t
user_column_name: uid
`, filepath.Join(dir, "wh.duckdb"))), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	projects := func(id int64) (importspec.Project, bool) {
		return importspec.Project{ID: id, Mode: config.IDSimplified}, id == 1
	}
	cat, err := scheduler.NewCatalog(ctx, scheduler.CatalogOptions{Store: st, Registry: reg, Projects: projects, Files: []*importspec.Import{im}})
	if err != nil {
		t.Fatal(err)
	}
	mon := alerts.NewMonitor(alerts.MonitorOptions{Store: st, Pauser: cat, Projects: cfg.Projects})
	// Three full diffs of 100 rows, then five feed runs of 2 changes.
	start := time.Now().Add(-time.Hour).UnixMilli()
	for i, read := range []int64{100, 100, 100, 2, 2, 2, 2, 2} {
		r := store.Run{ID: fmt.Sprintf("r%d", i), Project: 1, Import: "m", Trigger: "api", Status: store.RunRunning, StartedMs: start + int64(i)*1000}
		if _, _, err := st.StartRun(ctx, store.RunStart{Run: r}); err != nil {
			t.Fatal(err)
		}
		r.Status, r.EndedMs, r.RowsRead = store.RunSucceeded, r.StartedMs+500, read
		if err := st.UpdateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := st.MirrorRecordRun(ctx, 1, r.ID, store.MirrorCounts{Inserted: read, Rows: 100}); err != nil {
			t.Fatal(err)
		}
	}
	preflight := func(id string, rows int64) error {
		w := mon.Watch(ctx, im, store.Run{ID: id, Project: 1, Import: "m"})
		return w.Preflight(ctx, run.Plan{Import: im, Whole: true, SourceRows: func(context.Context) int64 { return rows }})
	}
	if err := preflight("next", 101); err != nil {
		t.Fatalf("a table of 101 rows after feed runs: %v", err)
	}
	if err := preflight("truncated", 0); err == nil || !strings.Contains(err.Error(), "median of 100") {
		t.Fatalf("a truncated table: %v, want held against the median of 100", err)
	}
	// After a run (a source that cannot count): the run's table rows.
	w := mon.Watch(ctx, im, store.Run{ID: "after", Project: 1, Import: "m"})
	if err := st.MirrorRecordRun(ctx, 1, "after", store.MirrorCounts{Updated: 3, Rows: 100}); err != nil {
		t.Fatal(err)
	}
	end := w.End(ctx, store.Run{ID: "after", Project: 1, Import: "m", Status: store.RunSucceeded, RowsRead: 3}, run.Stats{})
	for _, a := range end.Alerts {
		if a.Kind == alerts.KindVolume {
			t.Fatalf("a feed run of 3 changes on a table of 100 rows alerted: %s", a.Body)
		}
	}
}
