package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tributary-dev/tributary/connectors"
)

// The tables, roles and publications a feed refuses (ErrFeedUnavailable)
// or accepts, and the shapes of what it reports for them.
// TestFeedUnavailable: what the feed cannot do exactly is
// ErrFeedUnavailable, and leaves nothing behind in the database.
func TestFeedUnavailable(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	src := db.open(t)
	db.exec(t, "CREATE TABLE nokey (id int, v text)")
	db.exec(t, "CREATE TABLE iv (id int PRIMARY KEY, d interval)")
	db.exec(t, "CREATE TABLE ok (id int PRIMARY KEY, v text)")
	db.exec(t, "CREATE UNLOGGED TABLE unlogged (id int PRIMARY KEY, v text)")
	db.exec(t, "CREATE VIEW vw AS SELECT * FROM ok")
	for _, c := range []struct {
		table string
		cols  []string
	}{
		{"nokey", nil},           // no replica identity: a publication would break its DELETEs
		{"iv", nil},              // interval is read as text
		{"iv", []string{"id"}},   // fine: only the key …
		{"ok", []string{"nope"}}, // … but an unknown column is an error
	} {
		f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: c.table}, Key: []string{"id"}, Columns: c.cols}
		_, err := src.StartFeed(ctx, f)
		_ = src.DropFeed(ctx, f)
		if c.table == "iv" && c.cols != nil {
			if err != nil {
				t.Errorf("%s %v: %v", c.table, c.cols, err)
			}
			continue
		}
		if c.table == "ok" {
			if !errors.Is(err, connectors.ErrNotFound) {
				t.Errorf("unknown column: %v", err)
			}
			continue
		}
		if !errors.Is(err, connectors.ErrFeedUnavailable) {
			t.Errorf("%s: %v, want ErrFeedUnavailable", c.table, err)
		}
		if s, p := slotCount(t, db, f.Name); s != 0 || p != 0 {
			t.Errorf("%s: %d slots, %d publications left", c.table, s, p)
		}
	}

	// A role without REPLICATION, owning its table.
	role := testFeedName(t)
	db.exec(t, "CREATE ROLE "+role+" LOGIN NOREPLICATION")
	t.Cleanup(func() {
		_, _ = db.conn.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = db.conn.Exec(context.Background(), "DROP ROLE "+role)
	})
	db.exec(t, "ALTER TABLE ok OWNER TO "+role)
	src2, err := Open(ctx, map[string]string{"dsn": db.dsn + " user=" + role})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "ok"}, Key: []string{"id"}}
	if _, err := src2.StartFeed(ctx, f); !errors.Is(err, connectors.ErrFeedUnavailable) {
		t.Errorf("role without REPLICATION: %v, want ErrFeedUnavailable", err)
	}
	if err := src2.DropFeed(ctx, f); err != nil {
		t.Errorf("DropFeed of a feed that never started: %v", err)
	}
	// With REPLICATION but not owning the table: no publication.
	db.exec(t, "ALTER ROLE "+role+" REPLICATION")
	db.exec(t, "ALTER TABLE ok OWNER TO postgres")
	if _, err := src2.StartFeed(ctx, f); !errors.Is(err, connectors.ErrFeedUnavailable) {
		t.Errorf("role not owning the table: %v, want ErrFeedUnavailable", err)
	}
	if s, p := slotCount(t, db, f.Name); s != 0 || p != 0 {
		t.Errorf("role not owning the table: %d slots, %d publications left", s, p)
	}
}

// TestFeedNamedPublication: with `publication:` the feed uses the user's
// publication and never creates or drops one.
func TestFeedNamedPublication(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
	db.exec(t, `CREATE PUBLICATION "Mine" FOR TABLE t`)
	src, err := Open(ctx, map[string]string{"dsn": db.dsn, "publication": "Mine"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if s, p := slotCount(t, db, f.Name); s != 1 || p != 0 {
		t.Errorf("%d slots, %d own publications", s, p)
	}
	db.exec(t, "INSERT INTO t VALUES (1, 'a')")
	m := mirror{}
	_, ops := changes(t, src, f, pos, m, 0)
	if !slices.Equal(ops, []string{"insert 1"}) {
		t.Errorf("ops %q", ops)
	}
	if err := src.DropFeed(ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, p := slotCount(t, db, "Mine"); p != 1 {
		t.Error("the user's publication was dropped")
	}
	if s, _ := slotCount(t, db, f.Name); s != 0 {
		t.Error("slot left after DropFeed")
	}
	if _, err := Open(ctx, map[string]string{"dsn": db.dsn, "publication": "bad-name"}); err == nil {
		t.Error("a publication name that is not an identifier was accepted")
	}
}

// TestFeedReleasesWAL: with only other tables changing, Changes still
// moves the position on, and confirming it lets the slot release WAL
// (restart_lsn advances), so an idle mirrored table does not make the
// server keep WAL forever.
func TestFeedReleasesWAL(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
	db.exec(t, "CREATE TABLE other (id int, v text)")
	src := db.open(t)
	f, pos := startFeedT(t, src)
	restart := func() string {
		var lsn string
		if err := db.conn.QueryRow(ctx, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1", f.Name).Scan(&lsn); err != nil {
			t.Fatal(err)
		}
		return lsn
	}
	first := restart()
	m := mirror{}
	for i := 0; i < 3; i++ {
		db.exec(t, "INSERT INTO other SELECT g, md5(g::text) FROM generate_series(1, 1000) g")
		db.exec(t, "CHECKPOINT") // logs the running transactions a slot may restart at
		next, ops := changes(t, src, f, pos, m, 0)
		if len(ops) != 0 {
			t.Fatalf("changes of another table reported: %q", ops)
		}
		if next == pos {
			t.Fatalf("round %d: the position did not move past other tables' changes", i)
		}
		if err := src.ConfirmFeed(ctx, f, next); err != nil {
			t.Fatal(err)
		}
		pos = next
	}
	if last := restart(); last == first {
		t.Errorf("restart_lsn still %s after three confirmed rounds", last)
	}
}

// TestFeedReplicaIdentityFull: a table without a primary key, with
// REPLICA IDENTITY FULL and the import's own key column.
func TestFeedReplicaIdentityFull(t *testing.T) {
	db := feedDB(t)
	db.exec(t, "CREATE TABLE t (id int NOT NULL, v text, big text)")
	db.exec(t, "ALTER TABLE t REPLICA IDENTITY FULL")
	db.exec(t, "INSERT INTO t VALUES (1, 'a', $1), (2, 'b', NULL), (3, 'c', NULL)", bigText(100_000))
	src := db.open(t)
	f, pos := startFeedT(t, src)
	m := tableState(t, src, "t", 0)
	db.exec(t, "UPDATE t SET id = 20 WHERE id = 2")
	db.exec(t, "UPDATE t SET v = 'a2' WHERE id = 1")
	db.exec(t, "DELETE FROM t WHERE id = 3")
	_, ops := changes(t, src, f, pos, m, 0)
	equalState(t, m, tableState(t, src, "t", 0))
	if !slices.Equal(ops, []string{"delete 2", "update 20", "update 1", "delete 3"}) {
		t.Errorf("ops %q", ops)
	}
}

// TestFeedRelationMessages: inside a stream, a Relation message whose
// columns differ from the feed's start, or a TRUNCATE of the table, ends
// the feed (the catalog check before streaming catches what was
// committed before the call; these catch what comes during it).
func TestFeedRelationMessages(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (id int PRIMARY KEY, v text)")
	src := db.open(t)
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
	sh, err := src.feedShape(ctx, f, true)
	if err != nil {
		t.Fatal(err)
	}
	d := &decoder{s: src, f: f, sh: sh, lost: func(format string, args ...any) error { return connectors.ErrFeedLost }}
	col := func(name string, typ uint32) *pglogrepl.RelationMessageColumn {
		return &pglogrepl.RelationMessageColumn{Name: name, DataType: typ, TypeModifier: -1}
	}
	same := &pglogrepl.RelationMessage{RelationID: sh.rel, Columns: []*pglogrepl.RelationMessageColumn{col("id", pgtype.Int4OID), col("v", pgtype.TextOID)}}
	if err := d.change(ctx, same); err != nil {
		t.Errorf("unchanged relation: %v", err)
	}
	other := &pglogrepl.RelationMessage{RelationID: sh.rel + 1, Columns: []*pglogrepl.RelationMessageColumn{col("x", pgtype.Int4OID)}}
	if err := d.change(ctx, other); err != nil {
		t.Errorf("another relation: %v", err)
	}
	for _, m := range []pglogrepl.Message{
		&pglogrepl.RelationMessage{RelationID: sh.rel, Columns: []*pglogrepl.RelationMessageColumn{col("id", pgtype.Int4OID), col("v", pgtype.VarcharOID)}},
		&pglogrepl.RelationMessage{RelationID: sh.rel, Columns: []*pglogrepl.RelationMessageColumn{col("id", pgtype.Int4OID)}},
		&pglogrepl.TruncateMessage{RelationIDs: []uint32{sh.rel + 1, sh.rel}},
	} {
		if err := d.change(ctx, m); !errors.Is(err, connectors.ErrFeedLost) {
			t.Errorf("%T %+v: %v, want ErrFeedLost", m, m, err)
		}
	}
}

// TestFeedNames: feed names are validated before any SQL, and a table
// name that needs quoting works through the publication, the catalog
// look-ups and the TOAST fetch.
func TestFeedNames(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	src := db.open(t)
	for _, name := range []string{"", "Upper", "x; DROP TABLE t", `a"b`, strings.Repeat("a", 64)} {
		f := connectors.Feed{Name: name, Table: connectors.Table{Name: "t"}, Key: []string{"id"}}
		if _, err := src.StartFeed(ctx, f); !errors.Is(err, connectors.ErrBadRequest) {
			t.Errorf("feed name %q: %v, want ErrBadRequest", name, err)
		}
		if err := src.DropFeed(ctx, f); !errors.Is(err, connectors.ErrBadRequest) {
			t.Errorf("drop feed name %q: %v, want ErrBadRequest", name, err)
		}
	}
	db.exec(t, `CREATE SCHEMA "Odd Schema"`)
	db.exec(t, `CREATE TABLE "Odd Schema"."we""ird; tab" ("Key col" int PRIMARY KEY, "v""al" text)`)
	table := `Odd Schema.we"ird; tab`
	db.exec(t, `INSERT INTO "Odd Schema"."we""ird; tab" VALUES (1, $1)`, bigText(100_000))
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: table}, Key: []string{"Key col"}}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })
	m := tableState(t, src, table, 0)
	db.exec(t, `UPDATE "Odd Schema"."we""ird; tab" SET "Key col" = 2`)
	_, ops := changes(t, src, f, pos, m, 0)
	equalState(t, m, tableState(t, src, table, 0))
	if !slices.Equal(ops, []string{"delete 1", "update 2"}) {
		t.Errorf("ops %q", ops)
	}
}

// TestFeedColumns: a feed of some columns reports those, then the key.
func TestFeedColumns(t *testing.T) {
	db := feedDB(t)
	ctx := context.Background()
	db.exec(t, "CREATE TABLE t (a text, id int PRIMARY KEY, b int, c bool)")
	src := db.open(t)
	f := connectors.Feed{Name: testFeedName(t), Table: connectors.Table{Name: "t"}, Key: []string{"id"}, Columns: []string{"c", "a"}}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.DropFeed(context.Background(), f) })
	db.exec(t, "INSERT INTO t VALUES ('x', 1, 2, true)")
	db.exec(t, "DELETE FROM t")
	var rows [][]string
	var names []string
	if _, err := src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
		names = names[:0]
		for _, fd := range rec.Schema().Fields() {
			names = append(names, fd.Name)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, render(rec, i, 0))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"$op", "c", "a", "id"}) {
		t.Errorf("columns %q", names)
	}
	want := [][]string{{"insert", "true", "x", "1"}, {"delete", "NULL", "NULL", "1"}}
	if !slices.EqualFunc(rows, want, slices.Equal[[]string]) {
		t.Errorf("rows %q, want %q", rows, want)
	}
}
