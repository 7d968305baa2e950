package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// feedDB is a test database on a server with wal_level = logical. Its
// replication slots are dropped before the database (a database with a
// slot cannot be dropped), and the test fails if any was left.
func feedDB(t *testing.T) *testDB {
	t.Helper()
	db := newDB(t)
	var level string
	if err := db.conn.QueryRow(context.Background(), "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		msg := "wal_level is " + level + ", so the Postgres change feed is NOT TESTED (ALTER SYSTEM SET wal_level = logical, then restart the server)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("\n\n*** SKIPPED: " + msg + " ***\n")
	}
	t.Cleanup(func() {
		_, _ = db.conn.Exec(context.Background(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = $1 AND active_pid IS NOT NULL`, db.name)
		_, _ = db.conn.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = $1 AND NOT active`, db.name)
	})
	return db
}

// startFeedT starts a feed of table t (key id), dropped at cleanup, and
// returns it with its start position.
func startFeedT(t *testing.T, src *Source) (connectors.Feed, string) {
	t.Helper()
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
	pos, err := src.StartFeed(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })
	return f, pos
}

func testFeedName(t *testing.T) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "tributary_test_" + hex.EncodeToString(b[:])
}

// mirror is what a Mirror sync would hold: rows by key, rendered as text
// by Arrow, so the feed's batches and Read's compare value for value.
type mirror map[string][]string

func render(rec arrow.RecordBatch, row int, from int) []string {
	out := make([]string, 0, rec.NumCols())
	for c := from; c < int(rec.NumCols()); c++ {
		col := rec.Column(c)
		if col.IsNull(row) {
			out = append(out, "NULL")
		} else {
			out = append(out, strings.Clone(col.ValueStr(row))) // the buffer is recycled after the batch
		}
	}
	return out
}

// tableState reads the table with Read, as a full keyed re-read would.
func tableState(t *testing.T, src *Source, table string, key int) mirror {
	t.Helper()
	m := mirror{}
	err := src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: table}}, func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			r := render(rec, i, 0)
			m[r[key]] = r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// changes runs Changes from pos, applies its batches to m and returns the
// next position and the ops seen, as "op key".
func changes(t *testing.T, src *Source, f connectors.Feed, pos string, m mirror, key int) (string, []string) {
	t.Helper()
	var ops []string
	next, err := src.Changes(context.Background(), f, pos, func(rec arrow.RecordBatch) error {
		if rec.Schema().Field(0).Name != connectors.ChangeOpColumn {
			t.Fatalf("first column %s", rec.Schema().Field(0).Name)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			op := rec.Column(0).ValueStr(i)
			r := render(rec, i, 1)
			ops = append(ops, op+" "+r[key])
			if op == connectors.ChangeDelete {
				delete(m, r[key])
			} else {
				m[r[key]] = r
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Changes from %s: %v", pos, err)
	}
	return next, ops
}

func equalState(t *testing.T, got, want mirror) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("mirror has %d rows, table %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || !slices.Equal(g, w) {
			t.Errorf("key %s: mirror %q, table %q", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %s in the mirror, not in the table", k)
		}
	}
}

func slotCount(t *testing.T, db *testDB, name string) (slots, pubs int) {
	t.Helper()
	ctx := context.Background()
	if err := db.conn.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if err := db.conn.QueryRow(ctx, "SELECT count(*) FROM pg_publication WHERE pubname = $1", name).Scan(&pubs); err != nil {
		t.Fatal(err)
	}
	return slots, pubs
}

// bigText does not compress, so PostgreSQL stores it out of line (TOAST).
func bigText(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

const feedTable = `CREATE TABLE public.items (
	id int PRIMARY KEY, name text, score numeric(10,2), tags text[], at timestamptz,
	flag bool, mood public.mood, doc jsonb, body text)`

func TestFeedRounds(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'happy')")
	db.exec(t, feedTable)
	db.exec(t, `INSERT INTO items SELECT g, 'n' || g, g * 1.5, ARRAY['a', NULL], '2024-01-01T00:00:00Z'::timestamptz + g * interval '1 hour',
		g % 2 = 0, 'ok', '{"k": 1}', CASE WHEN g = 5 THEN $1 ELSE 'short' END FROM generate_series(1, 20) g`, bigText(200_000))
	src := db.open(t)
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "public.items"}, Key: []string{"id"}}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })
	// The engine's first full read, after StartFeed.
	m := tableState(t, src, "public.items", 0)

	// Batches have Read's column types, $op first.
	var readSchema *arrow.Schema
	_ = src.Read(ctx, connectors.ReadRequest{Table: f.Table, Limit: 1}, func(rec arrow.RecordBatch) error {
		readSchema = rec.Schema()
		return nil
	})

	// Round 1: inserts with NULLs, updates (one row twice: ties in one
	// transaction), deletes, a key deleted and re-inserted, and a
	// rolled-back transaction that must emit nothing.
	db.exec(t, `INSERT INTO items (id, name) VALUES (21, NULL), (22, 'x')`)
	db.exec(t, `INSERT INTO items VALUES (23, 'all', 1.25, '{}', NULL, NULL, 'happy', 'null', NULL)`)
	db.exec(t, `BEGIN; UPDATE items SET name = 'twice-1' WHERE id = 2; UPDATE items SET name = 'twice-2', score = NULL WHERE id = 2; COMMIT`)
	db.exec(t, `UPDATE items SET tags = NULL, mood = 'sad' WHERE id BETWEEN 6 AND 8`)
	db.exec(t, `DELETE FROM items WHERE id IN (9, 10)`)
	db.exec(t, `BEGIN; DELETE FROM items WHERE id = 11; INSERT INTO items (id, name) VALUES (11, 'again'); COMMIT`)
	db.exec(t, `BEGIN; INSERT INTO items (id, name) VALUES (999, 'rolled back'); UPDATE items SET name = 'rb' WHERE id = 1; DELETE FROM items WHERE id = 3; ROLLBACK`)
	var ops []string
	schemaChecked := false
	next, err := src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
		if !schemaChecked {
			schemaChecked = true
			got := rec.Schema()
			if got.NumFields() != readSchema.NumFields()+1 || got.Field(0).Type.ID() != arrow.STRING {
				t.Errorf("change schema %s, read schema %s", got, readSchema)
			}
			for i, fd := range readSchema.Fields() {
				if g := got.Field(i + 1); g.Name != fd.Name || !arrow.TypeEqual(g.Type, fd.Type) {
					t.Errorf("column %d: change %s %s, read %s %s", i, g.Name, g.Type, fd.Name, fd.Type)
				}
			}
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			r := render(rec, i, 1)
			ops = append(ops, rec.Column(0).ValueStr(i)+" "+r[0])
			if rec.Column(0).ValueStr(i) == connectors.ChangeDelete {
				delete(m, r[0])
			} else {
				m[r[0]] = r
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	equalState(t, m, tableState(t, src, "public.items", 0))
	for _, op := range ops {
		if strings.HasSuffix(op, " 999") || op == "delete 3" || op == "update 1" {
			t.Errorf("a rolled-back change was reported: %s", op)
		}
	}
	if !slices.Contains(ops, "delete 11") || !slices.Contains(ops, "insert 11") {
		t.Errorf("delete and re-insert of key 11 not both reported: %q", ops)
	}

	// Round 2: a key update is a delete of the old key and the new row; a
	// TOASTed value an update leaves alone keeps its value.
	db.exec(t, `UPDATE items SET id = 1003 WHERE id = 3`)
	db.exec(t, `UPDATE items SET name = 'big unchanged' WHERE id = 5`)
	// An update leaving a TOASTed value alone, of a row deleted later:
	// the value cannot be read any more, the update is skipped, the
	// delete follows.
	db.exec(t, `INSERT INTO items (id, body) VALUES (30, $1)`, bigText(100_000))
	db.exec(t, `UPDATE items SET name = 'doomed' WHERE id = 30`)
	db.exec(t, `DELETE FROM items WHERE id = 30`)
	// Unchanged, changed, unchanged again: the last read sees the change.
	body2 := bigText(150_000)
	db.exec(t, `INSERT INTO items (id, body) VALUES (31, $1)`, bigText(100_000))
	db.exec(t, `UPDATE items SET name = 'one' WHERE id = 31`)
	db.exec(t, `UPDATE items SET body = $1 WHERE id = 31`, body2)
	db.exec(t, `UPDATE items SET name = 'two' WHERE id = 31`)
	next2, ops2 := changes(t, src, f, next, m, 0)
	equalState(t, m, tableState(t, src, "public.items", 0))
	if !slices.Contains(ops2, "delete 3") || !slices.Contains(ops2, "update 1003") {
		t.Errorf("key update: ops %q", ops2)
	}
	if got := m["5"][8]; len(got) != 200_000 {
		t.Errorf("TOASTed body of row 5 has %d bytes after an update of another column", len(got))
	}
	if m["31"][8] != body2 || m["31"][1] != "two" {
		t.Errorf("row 31: name %q, body of %d bytes", m["31"][1], len(m["31"][8]))
	}
	if slices.Contains(ops2, "update 30") || !slices.Contains(ops2, "delete 30") {
		t.Errorf("update of a row deleted since: ops %q", ops2)
	}

	// Nothing new: the same position comes back and nothing is reported.
	next3, ops3 := changes(t, src, f, next2, m, 0)
	if len(ops3) != 0 {
		t.Errorf("no change, yet %q", ops3)
	}

	// ConfirmFeed moves the slot; a restart from the confirmed position
	// reports what came after, and a position before it is lost.
	if err := src.ConfirmFeed(ctx, f, next3); err != nil {
		t.Fatal(err)
	}
	var confirmed string
	if err := db.conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", f.Name).Scan(&confirmed); err != nil {
		t.Fatal(err)
	}
	if want := strings.Split(next3, ";")[0]; confirmed != want {
		t.Errorf("confirmed_flush_lsn %s, confirmed %s", confirmed, want)
	}
	db.exec(t, `INSERT INTO items (id, name) VALUES (50, 'after confirm')`)
	src2 := db.open(t) // as after a restart of Tributary
	_, ops4 := changes(t, src2, f, next3, m, 0)
	if !slices.Equal(ops4, []string{"insert 50"}) {
		t.Errorf("after restart from the confirmed position: %q", ops4)
	}
	equalState(t, m, tableState(t, src, "public.items", 0))
	if _, err := src2.Changes(ctx, f, pos, func(arrow.RecordBatch) error { return nil }); !errors.Is(err, connectors.ErrFeedLost) {
		t.Errorf("Changes from before the confirmed position: %v, want ErrFeedLost", err)
	}
}

func TestFeedLost(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	src := db.open(t)
	start := func(f connectors.Feed) string {
		t.Helper()
		db.exec(t, "DROP TABLE IF EXISTS t; CREATE TABLE t (id int PRIMARY KEY, v text)")
		pos, err := src.StartFeed(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		db.exec(t, "INSERT INTO t VALUES (1, 'a')")
		return pos
	}
	lost := func(what string, f connectors.Feed, pos string) {
		t.Helper()
		_, err := src.Changes(ctx, f, pos, func(arrow.RecordBatch) error { return nil })
		if !errors.Is(err, connectors.ErrFeedLost) {
			t.Errorf("%s: %v, want ErrFeedLost", what, err)
		}
	}
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
	t.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })

	pos := start(f)
	db.exec(t, "SELECT pg_drop_replication_slot($1)", f.Name)
	lost("slot dropped by hand", f, pos)

	pos = start(f)
	db.exec(t, "DROP TABLE t; CREATE TABLE t (id int PRIMARY KEY, v text)")
	lost("table dropped and recreated", f, pos)

	pos = start(f)
	db.exec(t, "ALTER TABLE t ADD COLUMN w int")
	lost("column added", f, pos)

	pos = start(f)
	db.exec(t, "TRUNCATE t")
	lost("truncated", f, pos)

	g := f
	g.Columns = []string{"v"}
	pos = start(g)
	db.exec(t, "ALTER TABLE t DROP COLUMN v")
	lost("column of the feed dropped", g, pos)

	// A type change committed together with a change.
	pos = start(f)
	db.exec(t, "BEGIN; ALTER TABLE t ALTER COLUMN v TYPE varchar(20); INSERT INTO t VALUES (2, 'b'); COMMIT")
	lost("column type changed", f, pos)

	lost("malformed position", f, "nonsense")

	pos = start(f)
	db.exec(t, "ALTER PUBLICATION "+f.Name+" DROP TABLE t")
	lost("table taken out of the publication", f, pos)

	pos = start(f)
	db.exec(t, "SELECT pg_drop_replication_slot($1)", f.Name)
	db.exec(t, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", f.Name)
	lost("slot recreated by hand with another plugin", f, pos)
}

// TestFeedTerminated cuts the walsender mid-stream: a retryable error,
// and a retry from the same position ends exact.
func TestFeedTerminated(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
	src := db.open(t)
	f, pos := startFeedT(t, src)
	m := tableState(t, src, "t", 0)
	// About 40 MB of stream, more than the socket buffers between the
	// walsender and the feed can hold while fn blocks: the cut must come
	// before the end has been sent.
	for i := 0; i < 4; i++ {
		db.exec(t, "INSERT INTO t SELECT g, repeat(md5(g::text), 8) FROM generate_series($1::int * 40000 + 1, ($1::int + 1) * 40000) g", i)
	}
	db.exec(t, "UPDATE t SET v = 'u' WHERE id % 7 = 0")
	db.exec(t, "DELETE FROM t WHERE id % 11 = 0")
	killed := false
	_, err := src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
		if !killed {
			killed = true
			db.exec(t, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", f.Name)
		}
		return nil
	})
	t.Logf("cut mid-stream: %v", err)
	if err == nil || errors.Is(err, connectors.ErrFeedLost) || connectors.IsPermanent(err) {
		t.Fatalf("Changes with its walsender terminated: %v, want a retryable error", err)
	}
	next, _ := changes(t, src, f, pos, m, 0)
	equalState(t, m, tableState(t, src, "t", 0))
	if len(m) == 0 || next == pos {
		t.Errorf("retry reported nothing (%d rows, next %s)", len(m), next)
	}
}

func TestFeedDrop(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
	src := db.open(t)
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
	for i := 0; i < 2; i++ { // a second start replaces the first
		if _, err := src.StartFeed(ctx, f); err != nil {
			t.Fatal(err)
		}
		if s, p := slotCount(t, db, f.Name); s != 1 || p != 1 {
			t.Fatalf("after StartFeed: %d slots, %d publications", s, p)
		}
	}
	for i := 0; i < 2; i++ { // dropping twice is fine
		if err := src.DropFeed(ctx, f); err != nil {
			t.Fatal(err)
		}
		if s, p := slotCount(t, db, f.Name); s != 0 || p != 0 {
			t.Fatalf("after DropFeed: %d slots, %d publications", s, p)
		}
	}
}

// Slot names are cluster-wide: a feed of the same name in another
// database (another install with the same project and import ids) is
// neither dropped nor taken over; this feed steps aside (its import
// re-diffs) and dropping it leaves the other one alone.
func TestFeedNameTakenByAnotherDatabase(t *testing.T) {
	ctx := context.Background()
	name := testFeedName(t)
	var srcs [2]*Source
	for i := range srcs {
		db := feedDB(t)
		db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
		srcs[i] = db.open(t)
	}
	f := connectors.Feed{Name: name, Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
	if _, err := srcs[0].StartFeed(ctx, f); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srcs[0].DropFeed(context.Background(), f) })
	slotDB := func() string {
		t.Helper()
		var db string
		if err := srcs[0].pool.QueryRow(ctx, `SELECT database FROM pg_replication_slots WHERE slot_name = $1`, name).Scan(&db); err != nil {
			t.Fatalf("the first database's slot is gone: %v", err)
		}
		return db
	}
	first := slotDB()
	_, err := srcs[1].StartFeed(ctx, f)
	if !errors.Is(err, connectors.ErrFeedUnavailable) || !strings.Contains(err.Error(), first) {
		t.Fatalf("StartFeed with the name taken in %s: %v, want ErrFeedUnavailable naming that database", first, err)
	}
	if err := srcs[1].DropFeed(ctx, f); err != nil {
		t.Fatalf("DropFeed of a feed whose name another database holds: %v", err)
	}
	if got := slotDB(); got != first {
		t.Fatalf("slot now in %s, want it left in %s", got, first)
	}
}

// A consumer that holds a batch longer than the server's
// wal_sender_timeout (a Mirror run applying a large group of changes)
// keeps its session: the feed reports its position meanwhile
// (keepAliveDuring). Without that the walsender ends the stream and
// every retry fails the same way.
func TestFeedSlowConsumer(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
	// The feed's sessions carry a short wal_sender_timeout (a runtime
	// parameter of the DSN, which replication connections keep).
	src, err := Open(ctx, map[string]string{"dsn": db.dsn + " wal_sender_timeout=1500"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	f, pos := startFeedT(t, src)
	m := tableState(t, src, "t", 0)
	db.exec(t, "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 20000) g")
	db.exec(t, "DELETE FROM t WHERE id % 3 = 0")
	var seen int
	next, err := src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
		if seen == 0 {
			time.Sleep(4 * time.Second) // well past the timeout
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			r := render(rec, i, 1)
			if rec.Column(0).ValueStr(i) == connectors.ChangeDelete {
				delete(m, r[0])
			} else {
				m[r[0]] = r
			}
		}
		seen += int(rec.NumRows())
		return nil
	})
	if err != nil {
		t.Fatalf("Changes with a consumer slower than wal_sender_timeout: %v", err)
	}
	if next == pos || seen == 0 {
		t.Fatalf("no changes read (%d, next %s)", seen, next)
	}
	equalState(t, m, tableState(t, src, "t", 0))
}
