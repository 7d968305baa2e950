package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tests run against a real PostgreSQL server: TRIBUTARY_TEST_PG (a
// keyword/value connection string to an existing database), else the
// local server as user postgres, then root.
func adminDSNs() []string {
	if v := os.Getenv("TRIBUTARY_TEST_PG"); v != "" {
		return []string{v}
	}
	const local = "host=127.0.0.1 port=5432 dbname=test sslmode=disable connect_timeout=5"
	return []string{local + " user=postgres", local + " user=root"}
}

// testDB is one test's own database, dropped at cleanup.
type testDB struct {
	name string
	dsn  string    // connection string to name
	conn *pgx.Conn // a connection to name, for fixtures and checks
}

// newDB creates database tributary_pg_<random>. Without a server the test
// is skipped loudly, or fails under CI=true, where a skip would hide that
// nothing was tested.
func newDB(t testing.TB) *testDB {
	t.Helper()
	ctx := context.Background()
	var admin *pgx.Conn
	var adminDSN string
	var errs []string
	for _, dsn := range adminDSNs() {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			admin, adminDSN = c, dsn
			break
		}
		errs = append(errs, err.Error())
	}
	if admin == nil {
		msg := "PostgreSQL is not reachable, so the postgres source is NOT TESTED: " + strings.Join(errs, "; ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	}
	var b [6]byte
	rand.Read(b[:])
	db := &testDB{name: "tributary_pg_" + hex.EncodeToString(b[:])}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.name); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	// A later keyword wins, so this retargets the admin settings.
	db.dsn = adminDSN + " dbname=" + db.name
	t.Cleanup(func() {
		if db.conn != nil {
			db.conn.Close(ctx)
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", db.name, err)
		}
		admin.Close(ctx)
	})
	c, err := pgx.Connect(ctx, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.conn = c
	return db
}

// open returns a source over the test database, closed at cleanup.
func (db *testDB) open(t testing.TB) *Source {
	t.Helper()
	src, err := Open(context.Background(), map[string]string{"dsn": db.dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func (db *testDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := db.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// activeQueries lists statements running in db other than the checker's
// own: what a cancelled read must not leave behind.
func (db *testDB) activeQueries(t testing.TB) []string {
	t.Helper()
	rows, err := db.conn.Query(context.Background(), `SELECT query FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND state <> 'idle'`, db.name)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return qs
}
