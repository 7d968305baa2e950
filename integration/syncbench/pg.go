package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// adminDSN is the connection string of a database syncbench may create
// databases from: TRIBUTARY_TEST_PG (as the postgres connector's tests
// read it), else the local server as user postgres.
func adminDSN() string {
	if v := os.Getenv("TRIBUTARY_TEST_PG"); v != "" {
		return v
	}
	return "host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable connect_timeout=5"
}

// withDB retargets dsn (keyword/value or URL) to database name. The
// tributary connector defaults to sslmode=verify-full, which a local
// server without TLS refuses, so a DSN that does not say is made explicit.
func withDB(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("TRIBUTARY_TEST_PG: %w", err)
		}
		u.Path = "/" + name
		q := u.Query()
		if q.Get("sslmode") == "" {
			q.Set("sslmode", "disable")
		}
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// A later keyword wins in libpq syntax, so appending retargets.
	dsn += " dbname=" + name
	if !strings.Contains(dsn, "sslmode=") {
		dsn += " sslmode=disable"
	}
	return dsn, nil
}

// benchDB is syncbench's own database, so a run never touches anything
// else on the server and -keep leaves a table to profile against.
type benchDB struct {
	name  string
	dsn   string
	admin *pgx.Conn
	conn  *pgx.Conn
	rows  int64 // rows in the table so far
}

func createDB(ctx context.Context) (*benchDB, error) {
	admin, err := pgx.Connect(ctx, adminDSN())
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL (set TRIBUTARY_TEST_PG to a keyword/value DSN): %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := &benchDB{name: "tributary_syncbench_" + hex.EncodeToString(b[:]), admin: admin}
	if db.dsn, err = withDB(adminDSN(), db.name); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db.name); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	if db.conn, err = pgx.Connect(ctx, db.dsn); err != nil {
		db.drop()
		return nil, err
	}
	// The columns of a typical event table. The index on (loaded_at, id)
	// is what any table synced incrementally by loaded_at has: without it
	// every run would sort the whole table, which is the schema's cost,
	// not the sync's.
	_, err = db.conn.Exec(ctx, `CREATE TABLE events (
		id bigint PRIMARY KEY,
		user_id text,
		device_id text,
		event_type text,
		event_time timestamptz NOT NULL,
		loaded_at timestamptz NOT NULL,
		amount numeric(12,2),
		quantity int,
		country text,
		is_paid boolean,
		props jsonb,
		note text);
	CREATE INDEX events_loaded_at_id ON events (loaded_at, id)`)
	if err != nil {
		db.drop()
		return nil, err
	}
	return db, nil
}

// insertSQL fills rows $1..$2 of the event table; fillParts retargets it.
const insertSQL = `INSERT INTO events SELECT
	g,
	'user-' || (g % 200000),
	'device-' || (g * 7919 % 300000),
	(ARRAY['Page Viewed','Signed Up','Add To Cart','Purchase','Search'])[1 + g % 5],
	$3::timestamptz - (g * 19 % 94608000) * INTERVAL '1 second',
	$4::timestamptz + (g / 64) * INTERVAL '1 millisecond',
	CASE WHEN g % 10 = 0 THEN NULL ELSE ((g * 31 % 100000) / 100.0)::numeric(12,2) END,
	1 + (g % 9)::int,
	(ARRAY['US','GB','DE','FR','IN','BR','JP'])[1 + g % 7],
	g % 3 = 0,
	jsonb_build_object('plan', (ARRAY['free','pro','team'])[1 + g % 3], 'page', '/p/' || (g % 500),
		'ab_test', g % 2 = 0, 'score', g % 1000),
	CASE WHEN g % 4 = 0 THEN NULL ELSE 'note for event ' || g END
	FROM generate_series($1::bigint, $2::bigint) AS g`

// fillTo appends rows until the table holds n. Sizes are filled in
// ascending order, so the 5M table is the 1M table plus 4M rows and the
// whole run inserts the largest size once.
func (db *benchDB) fillTo(ctx context.Context, n int64) error {
	if n <= db.rows {
		return nil
	}
	// Event times spread over the three years before now (the sync
	// refuses times before 1971 or in the future); rows are loaded in id
	// order, 64 to a millisecond, so loaded_at has ties across batches.
	now := time.Now().UTC().Add(-time.Hour)
	loadBase := now.Add(-24 * time.Hour)
	start := time.Now()
	const chunk = 1_000_000 // one statement per chunk, for progress lines
	for from := db.rows + 1; from <= n; from += chunk {
		to := min(from+chunk-1, n)
		if _, err := db.conn.Exec(ctx, insertSQL, from, to, now, loadBase); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		db.rows = to
		fmt.Printf("  %d / %d rows inserted (%s)\n", to, n, time.Since(start).Round(time.Second))
	}
	// Hint bits and the visibility map set now, not by the first reader,
	// so neither COPY nor the sync pays for writing them.
	if _, err := db.conn.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// copyRate is the yardstick: rows/s of the server's plain text COPY of the
// whole table into io.Discard, the best of two so a cold cache on the
// first pass does not flatter the sync.
func (db *benchDB) copyRate(ctx context.Context) (float64, error) {
	best := 0.0
	for range 2 {
		start := time.Now()
		tag, err := db.conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT * FROM events) TO STDOUT")
		if err != nil {
			return 0, fmt.Errorf("copy: %w", err)
		}
		if tag.RowsAffected() != db.rows {
			return 0, fmt.Errorf("copy: %d rows, the table holds %d", tag.RowsAffected(), db.rows)
		}
		best = max(best, float64(db.rows)/time.Since(start).Seconds())
	}
	return best, nil
}

// drop removes the database (FORCE: a killed sync may leave a session).
func (db *benchDB) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if db.conn != nil {
		db.conn.Close(ctx)
	}
	// A Mirror import's replication slot would keep the database.
	if _, err := db.admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1", db.name); err != nil {
		fmt.Fprintf(os.Stderr, "syncbench: drop the replication slots of %s: %v\n", db.name, err)
	}
	if _, err := db.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "syncbench: drop %s: %v\n", db.name, err)
	}
	db.admin.Close(ctx)
}

// keep closes the connections and leaves the database for profiling.
func (db *benchDB) keep() {
	ctx := context.Background()
	db.conn.Close(ctx)
	db.admin.Close(ctx)
}
