package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/pgtest"
)

// testDB is one test's own database, dropped at cleanup (internal/pgtest).
type testDB struct {
	name string
	dsn  string    // connection string to name
	conn *pgx.Conn // a connection to name, for fixtures and checks
}

func newDB(t testing.TB) *testDB {
	t.Helper()
	db := pgtest.Database(t, "tributary_pg", "the postgres source is")
	return &testDB{name: db.Name, dsn: db.DSN, conn: db.Conn}
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
