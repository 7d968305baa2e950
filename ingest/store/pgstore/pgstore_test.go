package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
	"github.com/tributary-dev/tributary/internal/pgtest"
)

// testSchema creates schema tributary_st_<random> for one test and drops it
// at cleanup, after the stores that use it (cleanups run last-in first-out,
// and stores are registered after their schema).
func testSchema(t testing.TB) (dsn, schema string) {
	t.Helper()
	admin, dsn := pgtest.Admin(t, "the postgres store is")
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
	c, _ := pgtest.Admin(t, "the postgres store is") // skip (or fail) once, not in every subtest
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
	c, _ := pgtest.Admin(t, "the postgres store is")
	c.Close(context.Background())
	storetest.Run(t, harness(pageSizes{scanFirst: 2, scanMax: 64, profiles: 2, lookups: 2}))
}
