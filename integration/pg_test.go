package integration

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

// pgDB is one test's own PostgreSQL database, dropped at cleanup: the
// warehouse a sync reads. TRIBUTARY_TEST_PG overrides the admin
// connection string; without a server the test fails under CI=true and is
// skipped loudly elsewhere.
type pgDB struct {
	name string
	dsn  string
	conn *pgx.Conn
}

func newPGDB(t testing.TB) *pgDB {
	t.Helper()
	ctx := context.Background()
	dsns := []string{"host=127.0.0.1 port=5432 dbname=test sslmode=disable connect_timeout=5 user=postgres",
		"host=127.0.0.1 port=5432 dbname=test sslmode=disable connect_timeout=5 user=root"}
	if v := os.Getenv("TRIBUTARY_TEST_PG"); v != "" {
		dsns = []string{v}
	}
	var admin *pgx.Conn
	var adminDSN string
	var errs []string
	for _, dsn := range dsns {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			admin, adminDSN = c, dsn
			break
		}
		errs = append(errs, err.Error())
	}
	if admin == nil {
		msg := "PostgreSQL is not reachable, so warehouse syncs are NOT TESTED: " + strings.Join(errs, "; ")
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := &pgDB{name: "tributary_it_" + hex.EncodeToString(b[:])}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.name); err != nil {
		t.Fatal(err)
	}
	db.dsn = strings.Replace(adminDSN, "dbname=test", "dbname="+db.name, 1)
	c, err := pgx.Connect(ctx, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.conn = c
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)")
		_ = admin.Close(ctx)
	})
	return db
}

func (db *pgDB) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := db.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// eventTable creates table ev of n rows: id 1..n (the primary key and
// $insert_id), user u<id>, event times in the last day, and insert times
// shared by 500 rows each so ties straddle every batch boundary.
func (db *pgDB) eventTable(t testing.TB, n int) {
	t.Helper()
	db.exec(t, `CREATE TABLE ev (id bigint PRIMARY KEY, user_id text NOT NULL, event_time timestamptz NOT NULL,
		loaded_at timestamptz NOT NULL, props jsonb)`)
	db.addRows(t, 1, n)
}

func (db *pgDB) addRows(t testing.TB, from, to int) {
	t.Helper()
	db.exec(t, `INSERT INTO ev SELECT i, 'u' || i, now() - interval '20 hours' + i * interval '1 millisecond',
		timestamptz '2026-01-01' + (i / 500) * interval '1 second', jsonb_build_object('n', i, 'plan', 'p' || (i % 7))
		FROM generate_series($1::bigint, $2::bigint) i`, from, to)
	db.exec(t, `ANALYZE ev`)
}
