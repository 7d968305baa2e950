package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// incFixture is a DuckDB warehouse table and a real embedded store. The
// table's rows share a handful of insert times, so ties straddle the
// Arrow batch boundaries (DuckDB hands out 2048-row batches).
type incFixture struct {
	t      *testing.T
	st     *duckstore.Store
	r      *Runner
	im     *importspec.Import
	nextID int
}

func newIncFixture(t *testing.T, primaryKey bool, extra string) *incFixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	whPath := filepath.Join(dir, "wh.duckdb")
	wh, err := sql.Open("duckdb", whPath)
	if err != nil {
		t.Fatal(err)
	}
	pk := ""
	if primaryKey {
		pk = " PRIMARY KEY"
	}
	if _, err := wh.Exec(`CREATE TABLE ev (id INTEGER` + pk + `, user_id VARCHAR NOT NULL, event_time TIMESTAMP NOT NULL, loaded_at TIMESTAMP NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	st, err := duckstore.Open(ctx, filepath.Join(dir, "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	spec := fmt.Sprintf(`id: inc
project_id: 1
import_type: event_stream
sync_mode: time_based
source: {kind: duckdb, path: %q}
table_params: {table: ev}
event_name: signup
time_column_name: event_time
user_column_name: user_id
insert_time_column_name: loaded_at
%s`, whPath, extra)
	im, err := importspec.Parse("inc.yaml", []byte(spec), kinds.Registry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The warehouse connection must be closed for the connector to open
	// the file; the fixture reopens it for every insert.
	if err := wh.Close(); err != nil {
		t.Fatal(err)
	}
	return &incFixture{t: t, st: st, im: im, r: &Runner{Registry: kinds.Registry(), Store: st}, nextID: 1}
}

// add inserts n rows with insert time loadedAt ('2026-01-01 10:00:00'
// style), returning the ids used.
func (f *incFixture) add(n int, loadedAt string) {
	f.t.Helper()
	db, err := sql.Open("duckdb", f.im.Source["path"])
	if err != nil {
		f.t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`INSERT INTO ev SELECT i, 'u' || i, TIMESTAMP '2026-01-01 00:00:00' + i * INTERVAL 1 SECOND, CAST(? AS TIMESTAMP)
		FROM range(?, ?) t(i)`, loadedAt, f.nextID, f.nextID+n)
	if err != nil {
		f.t.Fatal(err)
	}
	f.nextID += n
}

func (f *incFixture) sync(id string, opt Options) Stats {
	f.t.Helper()
	opt.RunID = id
	st, err := f.r.Run(context.Background(), f.im, importspec.Project{ID: 1, Mode: config.IDSimplified}, opt)
	if err != nil {
		f.t.Fatalf("run %s: %v", id, err)
	}
	return st
}

// stored counts events and distinct users in the store: each source row
// is one user, so both must equal the rows inserted.
func (f *incFixture) stored() (events, users int) {
	f.t.Helper()
	seen := map[string]bool{}
	err := f.st.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 62}, func(e *store.Event) error {
		events++
		seen[e.DistinctID] = true
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return events, len(seen)
}

func (f *incFixture) wantExactlyOnce() {
	f.t.Helper()
	ev, users := f.stored()
	if want := f.nextID - 1; ev != want || users != want {
		f.t.Fatalf("store holds %d events of %d users; want exactly %d of each", ev, users, want)
	}
}

// Ties on the insert time straddle batch boundaries and the end of a run;
// rows committed later with the last insert time are still picked up, with
// a primary key (strict tuple bound) and without one (inclusive bound).
func TestIncrementalTies(t *testing.T) {
	for _, pk := range []bool{true, false} {
		t.Run(fmt.Sprintf("primary_key=%v", pk), func(t *testing.T) {
			f := newIncFixture(t, pk, "")
			f.add(3000, "2026-01-01 10:00:00")
			f.add(3000, "2026-01-01 11:00:00")
			first := f.sync("r1", Options{})
			if first.RowsRead != 6000 || first.Imported != 6000 {
				t.Fatalf("first run: %+v", first)
			}
			f.wantExactlyOnce()
			// More rows with the same last insert time, and later ones.
			f.add(2500, "2026-01-01 11:00:00")
			f.add(100, "2026-01-01 12:00:00")
			second := f.sync("r2", Options{})
			if second.Imported != 2600 {
				t.Fatalf("second run imported %d, want 2600: %+v", second.Imported, second)
			}
			if pk && second.RowsRead != 2600 {
				t.Fatalf("with a key the second run must read only new rows; read %d", second.RowsRead)
			}
			f.wantExactlyOnce()
			if third := f.sync("r3", Options{}); third.Imported != 0 {
				t.Fatalf("third run imported %d", third.Imported)
			}
			f.wantExactlyOnce()
		})
	}
}

// A run stopped after its first batch resumes from that batch's committed
// watermark; nothing is lost or stored twice.
func TestIncrementalResumesAfterStop(t *testing.T) {
	f := newIncFixture(t, true, "")
	// Enough batches that the stop lands part-way: batches already in the
	// pipeline when it comes are still written.
	f.add(20000, "2026-01-01 10:00:00")
	f.add(20000, "2026-01-01 10:00:01")
	ctx, cancel := context.WithCancel(context.Background())
	batches := 0
	_, err := f.r.Run(ctx, f.im, importspec.Project{ID: 1, Mode: config.IDSimplified}, Options{RunID: "cut", Progress: func(Stats) {
		if batches++; batches == 2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v, want context.Canceled", err)
	}
	partial, _ := f.stored()
	if partial == 0 || partial >= 40000 {
		t.Fatalf("after the stop %d events are stored; want some, not all", partial)
	}
	rest := f.sync("resume", Options{})
	if int(rest.RowsRead)+partial != 40000 {
		t.Fatalf("resumed run read %d rows after %d were committed; want the remaining %d", rest.RowsRead, partial, 40000-partial)
	}
	f.wantExactlyOnce()
}

// A row that lands late with an insert time before the watermark is
// missed without a lookback (Mixpanel's Append behaviour) and picked up
// with one; the lookback's re-read rows are absorbed by dedup.
func TestIncrementalLookback(t *testing.T) {
	for _, lookback := range []string{"", "2h"} {
		t.Run("lookback="+lookback, func(t *testing.T) {
			extra := ""
			if lookback != "" {
				extra = "lookback: " + lookback + "\n"
			}
			f := newIncFixture(t, true, extra)
			f.add(1000, "2026-01-01 10:00:00")
			f.sync("r1", Options{})
			f.add(10, "2026-01-01 09:30:00") // late: before the watermark
			f.add(5, "2026-01-01 07:00:00")  // too late even for the lookback
			second := f.sync("r2", Options{})
			ev, _ := f.stored()
			switch lookback {
			case "":
				if second.Imported != 0 || ev != 1000 {
					t.Fatalf("without lookback: imported %d, stored %d; want 0 and 1000", second.Imported, ev)
				}
			default:
				if second.Imported != 10 || second.Duplicates != 1000 || ev != 1010 {
					t.Fatalf("with lookback: imported %d (dup %d), stored %d; want 10, 1000, 1010", second.Imported, second.Duplicates, ev)
				}
			}
		})
	}
}
