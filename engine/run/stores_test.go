package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/ingest/store/pgstore"
	"github.com/tributary-dev/tributary/internal/pgtest"
)

// storeCase opens a fresh store of one implementation for a test.
type storeCase struct {
	name string
	open func(t *testing.T) store.Store
}

// testStores are the stores a run is tested against: the embedded one
// always, PostgreSQL when a server is reachable (TRIBUTARY_TEST_PG_DSN,
// else the local server as postgres or root); under CI=true an
// unreachable server fails the test instead of skipping it.
func testStores(t *testing.T) []storeCase {
	cases := []storeCase{{"duckstore", func(t *testing.T) store.Store {
		st, err := duckstore.Open(context.Background(), filepath.Join(t.TempDir(), "store.duckdb"), duckstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}}}
	c, dsn, err := pgtest.Connect(context.Background())
	if err != nil {
		msg := "PostgreSQL is not reachable, so runs on the postgres store are NOT TESTED: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Log(msg)
		return cases
	}
	c.Close(context.Background())
	return append(cases, storeCase{"pgstore", func(t *testing.T) store.Store {
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var b [6]byte
		rand.Read(b[:])
		schema := "tributary_run_" + hex.EncodeToString(b[:])
		if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			defer admin.Close(ctx)
			// The store's backends drop their temp tables as they exit,
			// which can race with the DROP; retry a little.
			for range 10 {
				if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		st, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}})
}
