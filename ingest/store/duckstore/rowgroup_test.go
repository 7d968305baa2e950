package duckstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// rowGroupSizes is the largest row count of the table's row groups
// and how many row groups it has.
func rowGroupSizes(t *testing.T, s *Store, table string) (largest, groups int) {
	t.Helper()
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`CHECKPOINT`); err != nil {
		t.Fatal(err)
	}
	err := s.db.QueryRow(`SELECT max(n), count(*) FROM (SELECT row_group_id, max(count) AS n
		FROM pragma_storage_info('`+table+`') GROUP BY row_group_id)`).Scan(&largest, &groups)
	if err != nil {
		t.Fatal(err)
	}
	return largest, groups
}

// writeUserProfiles sets n user profiles u-from … u-(from+n-1).
func writeUserProfiles(t *testing.T, s *Store, from, n int) {
	t.Helper()
	ups := make([]store.ProfileUpdate, n)
	for i := range ups {
		u, err := profile.ParseUser(fmt.Appendf(nil, `{"$token":"t","$distinct_id":"u-%d","$set":{"n":%d}}`, from+i, i))
		if err != nil {
			t.Fatal(err)
		}
		ups[i] = store.ProfileUpdate{Update: u, Ref: i}
	}
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Profiles: ups}}); err != nil {
		t.Fatal(err)
	}
}

// TestRowGroupRows: the option sets the size of the row groups DuckDB
// writes, and a file keeps working when it is reopened with another size,
// smaller or larger than its last row group's, for the events table and
// for profiles, whose index DuckDB must keep in step (DuckDB once failed
// an insert after such a reopen: duckdb/duckdb#22109).
func TestRowGroupRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.duckdb")
	events, profiles := 0, 0
	write := func(s *Store, n int) {
		t.Helper()
		evs := storetest.GenEvents(1, n, int64(events))
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
			t.Fatal(err)
		}
		writeUserProfiles(t, s, profiles, n/2)
		events, profiles = events+n, profiles+n/2
	}
	for _, step := range []struct{ rowGroupRows, txnRows, rows int }{
		{0, 0, 30_000},           // DuckDB's default: one row group
		{4096, 4096, 30_000},     // smaller than the last row group on disk
		{0, 0, 10_000},           // and back
		{10_240, 10_240, 25_000}, // another size again
	} {
		opt := testOptions
		opt.RowGroupRows, opt.LoadTxnRows = step.rowGroupRows, step.txnRows
		s := openWith(t, path, opt)
		write(s, step.rows)
		requireCounts(t, s, events, 0)
		if got := len(profilesOf(t, s)); got != profiles {
			t.Fatalf("row groups of %d: %d profiles, want %d", step.rowGroupRows, got, profiles)
		}
		largest, groups := rowGroupSizes(t, s, "events")
		t.Logf("row groups of %d: events in %d row groups, the largest %d rows", step.rowGroupRows, groups, largest)
		if step.rowGroupRows == 4096 && groups < events/RowGroupRows+30_000/4096 {
			t.Fatalf("with row groups of 4096 rows, %d events are in only %d row groups", events, groups)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []int{-2048, 1000, RowGroupRows + 2048} {
		opt := testOptions
		opt.RowGroupRows = bad
		if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "n.duckdb"), opt); err == nil ||
			!strings.Contains(err.Error(), fmt.Sprintf("RowGroupRows must be a multiple of 2048 from 0 to %d, got %d", RowGroupRows, bad)) {
			t.Fatalf("RowGroupRows %d: error %v", bad, err)
		}
	}
}

// profilesOf is the project's user profiles by id.
func profilesOf(t *testing.T, s *Store) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	err := s.ScanProfiles(context.Background(), store.ProfileScan{Project: 1, Kind: profile.User}, func(p *store.StoredProfile) error {
		got[p.ID] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
