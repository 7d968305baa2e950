package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// The tests run against a real PostgreSQL server: TRIBUTARY_TEST_PG_DSN
// (or TRIBUTARY_TEST_PG, which the postgres connector's tests read), else
// the local server as user postgres, then root.
func adminDSNs() []string {
	for _, env := range []string{"TRIBUTARY_TEST_PG_DSN", "TRIBUTARY_TEST_PG"} {
		if v := os.Getenv(env); v != "" {
			return []string{v}
		}
	}
	const local = "host=127.0.0.1 port=5432 dbname=test sslmode=disable connect_timeout=5"
	return []string{local + " user=postgres", local + " user=root"}
}

// adminConn connects to the test server. Without a server the test is
// skipped loudly, or fails under CI=true, where a skip would hide that
// nothing was tested.
func adminConn(t testing.TB) (*pgx.Conn, string) {
	t.Helper()
	var errs []string
	for _, dsn := range adminDSNs() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			return c, dsn
		}
		errs = append(errs, err.Error())
	}
	msg := "PostgreSQL is not reachable, so the postgres store is NOT TESTED: " + strings.Join(errs, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	return nil, ""
}

// testSchema creates schema tributary_st_<random> for one test and drops it
// at cleanup, after the stores that use it (cleanups run last-in first-out,
// and stores are registered after their schema).
func testSchema(t testing.TB) (dsn, schema string) {
	t.Helper()
	admin, dsn := adminConn(t)
	var b [6]byte
	rand.Read(b[:])
	schema = "tributary_st_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		defer admin.Close(ctx)
		// A closed store's backends drop their temp tables (which depend
		// on the schema's event_seq) as they exit, after Close returned;
		// a DROP racing with that can deadlock, and then goes again.
		var err error
		for range 10 {
			if _, err = admin.Exec(dctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err == nil {
				return
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "40P01" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("drop schema %s: %v", schema, err)
	})
	return dsn, schema
}

// testStore remembers where its store lives, for Reopen.
type testStore struct {
	*Store
	dsn, schema string
	pages       pageSizes
}

func openTest(t testing.TB, dsn, schema string, pages pageSizes) *testStore {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	s.pages = pages
	return &testStore{Store: s, dsn: dsn, schema: schema, pages: pages}
}

func harness(pages pageSizes) storetest.Harness {
	return storetest.Harness{
		Open: func(t testing.TB) store.Store {
			dsn, schema := testSchema(t)
			return openTest(t, dsn, schema, pages)
		},
		Reopen: func(t testing.TB, s store.Store) store.Store {
			ts := s.(*testStore)
			if err := ts.Close(); err != nil {
				t.Fatalf("close before reopen: %v", err)
			}
			return openTest(t, ts.dsn, ts.schema, ts.pages)
		},
		Merges: func(t testing.TB, s store.Store, project int64) []store.Merge {
			return merges(t, s.(*testStore).Store, project)
		},
	}
}

func merges(t testing.TB, s *Store, project int64) []store.Merge {
	t.Helper()
	var out []store.Merge
	err := s.ScanMerges(context.Background(), project, func(m *store.Merge) error {
		c := *m
		c.Props = bytes.Clone(m.Props)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatalf("scan merges: %v", err)
	}
	return out
}

func TestConformance(t *testing.T) {
	c, _ := adminConn(t) // skip (or fail) once, not in every subtest
	c.Close(context.Background())
	storetest.Run(t, harness(defaultPages()))
}

// TestConformanceSmallPages runs the suite with pages of a few rows, so
// scans cross page boundaries (equal times, limits, name filters,
// cancellation) with little data.
func TestConformanceSmallPages(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite once is enough in -short")
	}
	c, _ := adminConn(t)
	c.Close(context.Background())
	storetest.Run(t, harness(pageSizes{scanFirst: 2, scanMax: 64, profiles: 2, lookups: 2}))
}
