package integration

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/internal/pgtest"
)

// pgDB is one test's own PostgreSQL database, dropped at cleanup: the
// warehouse a sync reads (internal/pgtest: which server, and what happens
// without one).
type pgDB struct {
	name string
	dsn  string
	conn *pgx.Conn
}

func newPGDB(t testing.TB) *pgDB {
	t.Helper()
	db := pgtest.Database(t, "tributary_it", "warehouse syncs are")
	return &pgDB{name: db.Name, dsn: db.DSN, conn: db.Conn}
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
