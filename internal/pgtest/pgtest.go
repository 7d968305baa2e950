// Package pgtest gives tests a real PostgreSQL server: the one
// TRIBUTARY_TEST_PG_DSN or TRIBUTARY_TEST_PG names (a keyword/value
// connection string to an existing database), else the local server as
// user postgres, then root. Without a server a test is skipped loudly, or
// fails under CI=true, where a skip would hide that nothing was tested.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// AdminDSNs are the connection strings to try, in order.
func AdminDSNs() []string {
	for _, env := range []string{"TRIBUTARY_TEST_PG_DSN", "TRIBUTARY_TEST_PG"} {
		if v := os.Getenv(env); v != "" {
			return []string{v}
		}
	}
	const local = "host=127.0.0.1 port=5432 dbname=test sslmode=disable connect_timeout=5"
	return []string{local + " user=postgres", local + " user=root"}
}

// Connect connects to the first server of AdminDSNs that answers; the
// error says, on one line, why each did not.
func Connect(ctx context.Context) (*pgx.Conn, string, error) {
	var errs []string
	for _, dsn := range AdminDSNs() {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			return c, dsn, nil
		}
		errs = append(errs, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return nil, "", errors.New(strings.Join(errs, "; "))
}

// Admin connects to the test server, or skips (fails under CI=true) the
// test saying that what is NOT TESTED. The caller closes the connection.
func Admin(t testing.TB, what string) (*pgx.Conn, string) {
	t.Helper()
	c, dsn, err := Connect(context.Background())
	if err == nil {
		return c, dsn
	}
	msg := "PostgreSQL is not reachable, so " + what + " NOT TESTED: " + err.Error()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	return nil, ""
}

// DB is one test's own database.
type DB struct {
	Name string
	DSN  string    // connection string to Name
	Conn *pgx.Conn // a connection to Name, for fixtures and checks
}

// Database creates database <prefix>_<random> for one test and drops it,
// after closing DB.Conn, at cleanup.
func Database(t testing.TB, prefix, what string) DB {
	t.Helper()
	ctx := context.Background()
	admin, adminDSN := Admin(t, what)
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := DB{Name: prefix + "_" + hex.EncodeToString(b[:])}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.Name); err != nil {
		_ = admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+db.Name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", db.Name, err)
		}
		_ = admin.Close(ctx)
	})
	// A later keyword wins, so this retargets the admin settings.
	db.DSN = adminDSN + " dbname=" + db.Name
	c, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	db.Conn = c
	t.Cleanup(func() { _ = c.Close(ctx) }) // runs before the drop: last in, first out
	return db
}
