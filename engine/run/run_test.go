package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors/duckdb"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// A sync of the demo events table into the real embedded store; an
// incremental run then reads nothing, and a full re-read is absorbed by dedup.
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
	text := strings.Replace(string(raw), "{connection: demo-warehouse}", "{kind: duckdb, path: "+wh+"}", 1) // the demo connection, inline
	im, err := importspec.Parse("demo-events.yaml", []byte(text), kinds.Registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Registry: kinds.Registry(), Store: st}
	project := importspec.Project{ID: 1, Mode: config.IDSimplified}
	first, err := r.Run(ctx, im, project, Options{RunID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.RowsRead != 20000 || first.Imported != 20000 || first.Failed != 0 {
		t.Fatalf("first run: %+v", first)
	}
	// The import is time_based: the next run reads nothing past the watermark.
	again, err := r.Run(ctx, im, project, Options{RunID: "run-2"})
	if err != nil || again.RowsRead != 0 {
		t.Fatalf("incremental run after a full read: %+v, %v; want 0 rows read", again, err)
	}
	second, err := r.Run(ctx, im, project, Options{RunID: "run-3", Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.Imported != 0 || second.Duplicates != 20000 {
		t.Fatalf("full re-read imported %d, duplicates %d; want 0 and 20000", second.Imported, second.Duplicates)
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
}

// People, groups and lookup-table imports of the demo warehouse land in
// the real store: 500 user profiles, 40 company groups, 100 items.
func TestDemoProfilesAndLookup(t *testing.T) {
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
	r := &Runner{Registry: kinds.Registry(), Store: st}
	project := importspec.Project{ID: 1, Mode: config.IDSimplified}
	for _, tc := range []struct {
		file string
		want int64
	}{{"demo-users.yaml", 500}, {"demo-companies.yaml", 40}, {"demo-items.yaml", 100}} {
		raw, err := os.ReadFile("../../configs/imports/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Replace(string(raw), "{connection: demo-warehouse}", "{kind: duckdb, path: "+wh+"}", 1) // the demo connection, inline
		im, err := importspec.Parse(tc.file, []byte(text), kinds.Registry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Run(ctx, im, project, Options{RunID: "run-" + tc.file})
		if err != nil || got.Imported != tc.want || got.Failed != 0 {
			t.Fatalf("%s: %+v, %v; want %d imported", tc.file, got, err, tc.want)
		}
	}
	count := func(q store.ProfileScan) (n int, sample string) {
		err := st.ScanProfiles(ctx, q, func(p *store.StoredProfile) error {
			n++
			sample = string(p.Props)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, sample
	}
	if n, sample := count(store.ProfileScan{Project: 1, Kind: profile.User}); n != 500 || !strings.Contains(sample, `"$email":`) {
		t.Fatalf("%d user profiles, sample %s", n, sample)
	}
	if n, _ := count(store.ProfileScan{Project: 1, Kind: profile.Group, GroupKey: "company_id"}); n != 40 {
		t.Fatalf("%d company groups, want 40", n)
	}
	rows := 0
	if err := st.ScanLookup(ctx, 1, "items", func(key string, row []byte) error {
		if !strings.Contains(string(row), `"sku":"`+key+`"`) {
			t.Errorf("row %s lacks its key %s", row, key)
		}
		rows++
		return nil
	}); err != nil || rows != 100 {
		t.Fatalf("lookup rows %d, %v", rows, err)
	}
}
