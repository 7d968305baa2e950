package duckstore

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// testOptions keeps each test's DuckDB small: the suite opens many at once.
var testOptions = Options{MemoryLimit: "512MB", Threads: 2}

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	return openWith(t, path, testOptions)
}

func openWith(t testing.TB, path string, opt Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opt)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return s
}

// harness runs the suite; scanPage > 0 overrides the scan page size.
func harness(scanPage int) storetest.Harness { return harnessWith(scanPage, testOptions) }

func harnessWith(scanPage int, opt Options) storetest.Harness {
	open := func(t testing.TB, path string) store.Store {
		s := openWith(t, path, opt)
		if scanPage > 0 {
			s.scanPage = scanPage
		}
		return s
	}
	return storetest.Harness{
		Open: func(t testing.TB) store.Store {
			return open(t, filepath.Join(t.TempDir(), "sub", "events.duckdb"))
		},
		Reopen: func(t testing.TB, s store.Store) store.Store {
			ds := s.(*Store)
			path := ds.path
			if err := ds.Close(); err != nil {
				t.Fatalf("close before reopen: %v", err)
			}
			return open(t, path)
		},
		Merges: func(t testing.TB, s store.Store, project int64) []store.Merge {
			var out []store.Merge
			err := s.(*Store).ScanMerges(context.Background(), project, func(m *store.Merge) error {
				c := *m
				c.Props = bytes.Clone(m.Props)
				out = append(out, c)
				return nil
			})
			if err != nil {
				t.Fatalf("scan merges: %v", err)
			}
			return out
		},
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, harness(0))
}

// TestConformanceSmallPages runs the suite with 3-row scan pages, so every
// scan of more than 3 events goes through the temp-table path and crosses
// page boundaries (ties, limits, name filters, cancellation).
func TestConformanceSmallPages(t *testing.T) {
	storetest.Run(t, harness(3))
}

func TestOpenCreatesSchemaIdempotently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "x.duckdb")
	s := openAt(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not created: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	defer s.Close()
	var n, v int
	if err := s.db.QueryRow(`SELECT count(*), max(version) FROM schema_version`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != 1 || v != schemaVersion {
		t.Fatalf("schema_version has %d rows, version %d; want 1 row, %d", n, v, schemaVersion)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	s := openAt(t, path)
	if _, err := s.db.Exec(`INSERT INTO schema_version VALUES (?)`, schemaVersion+1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(context.Background(), path, testOptions); err == nil {
		s.Close()
		t.Fatal("opened a file with a newer schema version")
	}
}

func TestOptionsApplied(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "x.duckdb"), Options{MemoryLimit: "300MB", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	settings := map[string]string{}
	rows, err := s.db.Query(`SELECT name, value FROM duckdb_settings() WHERE name IN ('memory_limit', 'threads', 'checkpoint_threshold')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		settings[k] = v
	}
	// DuckDB reports sizes in its own units (MiB/GiB), so compare loosely.
	if settings["threads"] != "1" || !bytes.Contains([]byte(settings["memory_limit"]), []byte("MiB")) ||
		!bytes.Contains([]byte(settings["checkpoint_threshold"]), []byte("MiB")) {
		t.Fatalf("settings = %v", settings)
	}
	t.Logf("settings: %v", settings)
}

// TestFailedLoadLeavesNothing proves that a loader transaction is atomic
// (BEGIN / appenders / log_state / COMMIT on one connection): a load that
// fails after every row was appended leaves no event and no merge in the
// tables, the acknowledged write stays in the log, and the retry applies it
// exactly once.
func TestFailedLoadLeavesNothing(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	ctx := context.Background()
	evs := storetest.GenEvents(1, 50_000, 0) // several appender flushes' worth
	merges := []store.Merge{{DistinctIDs: [2]string{"a", "b"}, Props: []byte(`{}`)}}
	boom := errors.New("injected failure before commit")
	failed, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.beforeCommit = func(c *duckdb.Conn) error {
		var err error
		once.Do(func() {
			// The rows are really in the open transaction at this point.
			if n, cerr := countOn(ctx, c); cerr != nil || n != int64(len(evs)) {
				t.Errorf("inside the transaction: %d rows (err %v), want %d", n, cerr, len(evs))
			}
			err = boom
			close(failed)
		})
		if err == nil {
			<-release // hold retries until the table has been checked
		}
		return err
	}
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs, Merges: merges}})
	if err != nil || res.Inserted != len(evs) {
		t.Fatalf("write: %+v, %v (the log makes it durable regardless of the loader)", res, err)
	}
	<-failed
	var ne int
	if err := s.db.QueryRow(`SELECT count(*) FROM events`).Scan(&ne); err != nil || ne != 0 {
		t.Fatalf("after the failed load the table has %d events (err %v), want 0", ne, err)
	}
	close(release)
	requireCounts(t, s, len(evs), 1) // the loader's retry applied it once
	if again, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil || again.Duplicates != len(evs) {
		t.Fatalf("rewrite: %+v %v", again, err)
	}
}

// TestCancelMidWrite cancels while a large write is appending and checks
// all-or-nothing: either it failed and nothing is stored, or it committed.
func TestCancelMidWrite(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	evs := storetest.GenEvents(1, 200_000, 0)
	ctx, cancel := context.WithCancel(context.Background())
	// Appending 200k events takes far longer than this on any machine.
	time.AfterFunc(20*time.Millisecond, cancel)
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}})
	cancel()
	switch {
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("write error %v, want context.Canceled", err)
		}
		requireCounts(t, s, 0, 0)
	default:
		t.Logf("write committed before the cancellation landed: %+v", res)
		requireCounts(t, s, len(evs), 0)
	}
}

// TestBrokenWriterIsReplaced: if a rollback ever fails, the writer
// connection may be stuck in a transaction; the next Write must not append
// into it but start on a fresh connection.
func TestBrokenWriterIsReplaced(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	ctx := context.Background()
	err := s.writer.Raw(func(dc any) error {
		_, err := dc.(*duckdb.Conn).ExecContext(ctx, "BEGIN TRANSACTION", nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.writerBroken = true
	evs := storetest.GenEvents(1, 10, 0)
	if res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil || res.Inserted != 10 {
		t.Fatalf("write after a broken writer: %+v, %v", res, err)
	}
	requireCounts(t, s, 10, 0)
}

func TestSecondOpenOfSameFileFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	s := openAt(t, path)
	if s2, err := Open(context.Background(), path, testOptions); err == nil {
		s2.Close()
		t.Fatal("a second Store opened the same file: two dedup sets over one table")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path) // released by Close
	s.Close()
}

// countOn counts events through the driver connection itself: the
// transaction is only visible there.
func countOn(ctx context.Context, c *duckdb.Conn) (int64, error) {
	rows, err := c.QueryContext(ctx, `SELECT count(*) FROM events`, nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		return 0, err
	}
	n, ok := dest[0].(int64)
	if !ok {
		return 0, fmt.Errorf("count is %T", dest[0])
	}
	return n, nil
}

func requireCounts(t *testing.T, s *Store, events, merges int) {
	t.Helper()
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ne, nm int
	if err := s.db.QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM merges)`).Scan(&ne, &nm); err != nil {
		t.Fatal(err)
	}
	if ne != events || nm != merges {
		t.Fatalf("table has %d events and %d merges, want %d and %d", ne, nm, events, merges)
	}
}
