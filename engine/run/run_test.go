package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors/duckdb"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
)

// A full sync of the demo events table into the real embedded store, run
// twice: the second run re-reads every row and dedup absorbs them all.
func TestDemoEventsSyncTwice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wh := filepath.Join(dir, "demo-warehouse.duckdb")
	if _, err := duckdb.SeedDemo(ctx, wh); err != nil {
		t.Fatal(err)
	}
	st, err := duckstore.Open(ctx, filepath.Join(dir, "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := os.ReadFile("../../configs/imports/demo-events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "./data/demo-warehouse.duckdb", wh, 1)
	im, err := importspec.Parse("demo-events.yaml", []byte(text), kinds.Registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Registry: kinds.Registry(), Store: st}
	project := importspec.Project{ID: 1, Simplified: true}
	first, err := r.Run(ctx, im, project, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if first.RowsRead != 20000 || first.Imported != 20000 || first.Failed != 0 {
		t.Fatalf("first run: %+v", first)
	}
	second, err := r.Run(ctx, im, project, "run-2")
	if err != nil {
		t.Fatal(err)
	}
	if second.Imported != 0 || second.Duplicates != 20000 {
		t.Fatalf("second run imported %d, duplicates %d; want 0 and 20000", second.Imported, second.Duplicates)
	}
	n, tagged := 0, 0
	err = st.ScanEvents(ctx, store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 62}, func(e *store.Event) error {
		n++
		if strings.Contains(string(e.Props), `"$warehouse_import_job_id":"run-1"`) &&
			strings.Contains(string(e.Props), `"$source":"warehouse-import"`) {
			tagged++
		}
		return nil
	})
	if err != nil || n != 20000 || tagged != 20000 {
		t.Fatalf("stored %d events, %d tagged by the first run (err %v)", n, tagged, err)
	}
	people := *im
	people.ImportType = importspec.People
	if _, err := r.Run(ctx, &people, project, "run-3"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("people import: %v, want ErrNotSupported", err)
	}
}
