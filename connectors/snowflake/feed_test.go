package snowflake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
)

// The change feed tests run the real gosnowflake driver against sfserver,
// a local server speaking Snowflake's wire protocol (Snowflake itself
// cannot run here). It keeps a change log of each tracked table and
// answers CHANGES … AT … END queries, SHOW TABLES and ALTER TABLE … SET
// CHANGE_TRACKING / DATA_RETENTION_TIME_IN_DAYS as Snowflake documents
// them. The warehouse's own users change the tables through srv.Exec.

const items = "PUBLIC.ITEMS"

var itemCols = []sfserver.Column{
	{Name: "ID", Type: "NUMBER(38,0)", NotNull: true, PrimaryKey: true},
	{Name: "NAME", Type: "VARCHAR", NotNull: true},
	{Name: "AMOUNT", Type: "NUMBER(12,2)"},
	{Name: "TS", Type: "TIMESTAMP_NTZ(9)"},
}

func itemsFeed() connectors.Feed {
	return connectors.Feed{Name: "tributary_p1_i1", Table: connectors.Table{Name: items}, Key: []string{"ID"}}
}

// trackedItems creates ITEMS with a few rows and turns change tracking
// on, as the table's owner would.
func trackedItems(t *testing.T, srv *sfserver.Server, src *Source) {
	t.Helper()
	ctx := context.Background()
	rows := [][]any{
		{1, "one", "1.10", "2026-01-01 00:00:01"},
		{2, "two", "2.20", nil},
		{3, "three", nil, "2026-01-01 00:00:03"},
		{4, "four", "4.40", "2026-01-01 00:00:04"},
	}
	if err := srv.CreateTable(ctx, items, itemCols, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := src.db.ExecContext(ctx, "ALTER TABLE "+items+" SET CHANGE_TRACKING = TRUE"); err != nil {
		t.Fatal(err)
	}
}

func exec(t *testing.T, srv *sfserver.Server, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if err := srv.Exec(context.Background(), items, s); err != nil {
			t.Fatal(err)
		}
	}
}

// change is one row of a change batch, its values rendered by ValueStr.
type change struct {
	op   string
	vals []string
}

// changes runs Changes from pos and returns its rows and the next
// position, checking every batch's schema against want.
func changes(t *testing.T, src *Source, f connectors.Feed, pos string, want *arrow.Schema) ([]change, string) {
	t.Helper()
	var out []change
	next, err := src.Changes(context.Background(), f, pos, func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(want) {
			t.Fatalf("batch schema\n%v\nwant\n%v", rec.Schema(), want)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			c := change{op: rec.Column(0).ValueStr(i)}
			for j := 1; j < int(rec.NumCols()); j++ {
				c.vals = append(c.vals, rec.Column(j).ValueStr(i))
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, next
}

// readAll reads the table with Read: its schema and rows by key (the
// first column).
func readAll(t *testing.T, src *Source, table string, cols []string) (*arrow.Schema, map[string][]string) {
	t.Helper()
	var schema *arrow.Schema
	rows := map[string][]string{}
	err := src.Read(context.Background(), connectors.ReadRequest{Table: connectors.Table{Name: table}, Columns: cols}, func(rec arrow.RecordBatch) error {
		schema = rec.Schema()
		for i := 0; i < int(rec.NumRows()); i++ {
			var vals []string
			for j := 0; j < int(rec.NumCols()); j++ {
				vals = append(vals, rec.Column(j).ValueStr(i))
			}
			rows[vals[0]] = vals
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return schema, rows
}

// feedSchema is Read's schema with "$op" in front; the feed's columns
// are nullable, since a delete's are null.
func feedSchema(read *arrow.Schema) *arrow.Schema {
	fields := []arrow.Field{{Name: connectors.ChangeOpColumn, Type: arrow.BinaryTypes.String, Nullable: true}}
	for _, f := range read.Fields() {
		f.Nullable = true
		fields = append(fields, f)
	}
	return arrow.NewSchema(fields, nil)
}

// apply plays changes onto state, as a mirror does, after checking that
// every delete comes before the inserts and updates and has null
// non-key values.
func apply(t *testing.T, state map[string][]string, cs []change) {
	t.Helper()
	seenUpsert := false
	for _, c := range cs {
		switch c.op {
		case connectors.ChangeDelete:
			if seenUpsert {
				t.Fatalf("delete %v after an insert or update in %v", c.vals, cs)
			}
			for _, v := range c.vals[1:] {
				if v != array.NullValueStr {
					t.Fatalf("delete %v has non-key values", c.vals)
				}
			}
			delete(state, c.vals[0])
		case connectors.ChangeInsert, connectors.ChangeUpdate:
			seenUpsert = true
			state[c.vals[0]] = c.vals
		default:
			t.Fatalf("op %q", c.op)
		}
	}
}

func opsOf(cs []change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.op+" "+c.vals[0])
	}
	slices.Sort(out)
	return out
}

func sameState(t *testing.T, round string, got, want map[string][]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: mirrored state\n%v\ntable\n%v", round, got, want)
	}
}

// TestFeedRounds mirrors ITEMS through rounds of inserts, updates and
// deletes and checks after each that the changes, applied to the state
// read when the feed started, give what Read reads now.
func TestFeedRounds(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	f := itemsFeed()
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	readSchema, state := readAll(t, src, items, nil)
	want := feedSchema(readSchema)

	rounds := []struct {
		name  string
		stmts []string
		ops   []string // sorted; nil: not checked
	}{
		{"insert, update, delete, NULLs", []string{
			`INSERT INTO "ITEMS" VALUES (10, 'ten', 10.5, NULL), (11, 'eleven', NULL, NULL)`,
			`UPDATE "ITEMS" SET AMOUNT = NULL, TS = TIMESTAMP '2026-02-01 00:00:00.123456' WHERE ID = 1`,
			`DELETE FROM "ITEMS" WHERE ID = 2`,
		}, []string{"delete 2", "insert 10", "insert 11", "update 1"}},
		{"nothing", nil, []string{}},
		{"ties, net effect", []string{
			`UPDATE "ITEMS" SET NAME = 'same', AMOUNT = 7 WHERE ID IN (3, 4)`, // two rows, equal values
			`INSERT INTO "ITEMS" VALUES (20, 'brief', 1, NULL)`,               // inserted then deleted:
			`DELETE FROM "ITEMS" WHERE ID = 20`,                               // not reported
			`UPDATE "ITEMS" SET NAME = 'first' WHERE ID = 10`,                 // two updates of a row:
			`UPDATE "ITEMS" SET NAME = 'second' WHERE ID = 10`,                // one, with the last values
			`DELETE FROM "ITEMS" WHERE ID = 11`,                               // a key deleted and
			`INSERT INTO "ITEMS" VALUES (11, 'eleven again', 11.11, NULL)`,    // inserted again
		}, []string{"delete 11", "insert 11", "update 10", "update 3", "update 4"}},
		{"key update", []string{
			`UPDATE "ITEMS" SET ID = 100 WHERE ID = 3`,
		}, []string{"delete 3", "update 100"}},
		{"key swap", []string{
			`UPDATE "ITEMS" SET ID = CASE ID WHEN 1 THEN 4 ELSE 1 END WHERE ID IN (1, 4)`,
		}, []string{"delete 1", "delete 4", "update 1", "update 4"}},
		{"truncate: every row deleted", []string{`TRUNCATE "ITEMS"`}, nil},
		{"refill", []string{`INSERT INTO "ITEMS" VALUES (1, 'back', NULL, NULL)`}, []string{"insert 1"}},
	}
	for _, r := range rounds {
		exec(t, srv, r.stmts...)
		cs, next := changes(t, src, f, pos, want)
		if r.ops != nil && !slices.Equal(opsOf(cs), r.ops) {
			t.Fatalf("%s: changes %v, want %v", r.name, opsOf(cs), r.ops)
		}
		apply(t, state, cs)
		_, table := readAll(t, src, items, nil)
		sameState(t, r.name, state, table)
		if next == pos && len(r.stmts) > 0 {
			t.Fatalf("%s: position did not move", r.name)
		}
		pos = next
	}
	if len(state) != 1 {
		t.Fatalf("after truncate and refill: %v", state)
	}
}

// TestFeedColumns reports the columns asked for, with the key added,
// in the order given.
func TestFeedColumns(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	f := itemsFeed()
	f.Table.Name = "items" // unqualified, unquoted: PUBLIC.ITEMS
	f.Columns = []string{"AMOUNT", "NAME"}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, srv, `UPDATE "ITEMS" SET AMOUNT = 9.99 WHERE ID = 1`, `DELETE FROM "ITEMS" WHERE ID = 2`)
	readSchema, _ := readAll(t, src, items, []string{"AMOUNT", "NAME", "ID"})
	cs, _ := changes(t, src, f, pos, feedSchema(readSchema))
	got := fmt.Sprint(cs)
	if want := "[{delete [(null) (null) 2]} {update [9.99 one 1]}]"; got != want {
		t.Fatalf("changes %s, want %s", got, want)
	}
	f.Columns = []string{"NOPE"}
	if _, err := src.StartFeed(ctx, f); !errors.Is(err, connectors.ErrNotFound) {
		t.Fatalf("missing column: %v", err)
	}
}

// TestFeedTypes checks that every type the conformance suite uses comes
// out of the feed as Read produces it, value for value.
func TestFeedTypes(t *testing.T) {
	srv := newServer(t, sfserver.Config{TZOffsetMinutes: 330})
	src := feedSource(t, srv)
	ctx := context.Background()
	cols := []sfserver.Column{{Name: "ID", Type: "NUMBER(38,0)", NotNull: true, PrimaryKey: true}}
	for _, ty := range []string{"INT", "FLOAT", "BOOLEAN", "VARCHAR", "TIMESTAMP_NTZ(9)", "TIMESTAMP_TZ(9)",
		"TIMESTAMP_LTZ(9)", "DATE", "TIME", "NUMBER(12,2)", "VARIANT", "BINARY"} {
		cols = append(cols, sfserver.Column{Name: "C_" + strings.NewReplacer("(", "_", ")", "", ",", "_").Replace(ty), Type: ty})
	}
	if err := srv.CreateTable(ctx, items, cols, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := src.db.ExecContext(ctx, "ALTER TABLE "+items+" SET CHANGE_TRACKING = TRUE"); err != nil {
		t.Fatal(err)
	}
	f := itemsFeed()
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, srv, `INSERT INTO "ITEMS" VALUES
		(1, -42, 1.5e300, true, 'héllo "q"', TIMESTAMP '2026-03-04 05:06:07.123456', TIMESTAMPTZ '2026-03-04 05:06:07.654321+00',
		 TIMESTAMPTZ '1969-12-31 23:59:59.5+00', DATE '1999-12-31', TIME '23:59:59.999999', -12345.67, '{"a":[1,2]}', '\xDE\xAD'::BLOB),
		(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
		(3, 9007199254740993, -0.0, false, '', TIMESTAMP '0001-01-01 00:00:00', TIMESTAMPTZ '9999-12-31 23:59:59.999999+00',
		 TIMESTAMPTZ '2026-01-01 00:00:00+00', DATE '1970-01-01', TIME '00:00:00', 0.01, '[]', ''::BLOB)`)

	var read []arrow.RecordBatch
	err = src.Read(ctx, connectors.ReadRequest{Table: f.Table, OrderBy: []string{"ID"}}, func(rec arrow.RecordBatch) error {
		rec.Retain()
		read = append(read, rec)
		return nil
	})
	if err != nil || len(read) != 1 {
		t.Fatalf("read: %v, %d batches", err, len(read))
	}
	defer read[0].Release()
	var fed []arrow.RecordBatch
	if _, err := src.Changes(ctx, f, pos, func(rec arrow.RecordBatch) error {
		rec.Retain()
		fed = append(fed, rec)
		return nil
	}); err != nil || len(fed) != 1 {
		t.Fatalf("changes: %v, %d batches", err, len(fed))
	}
	defer fed[0].Release()
	r, c := read[0], fed[0]
	if r.NumRows() != 3 || c.NumRows() != 3 || c.NumCols() != r.NumCols()+1 {
		t.Fatalf("read %d rows × %d, feed %d × %d", r.NumRows(), r.NumCols(), c.NumRows(), c.NumCols())
	}
	// The feed's rows in key order.
	order := make([]int, 3)
	for i := range order {
		id := c.Column(1).ValueStr(i)
		order[int(id[0]-'1')] = i
	}
	for j := 0; j < int(r.NumCols()); j++ {
		rf, cf := r.Schema().Field(j), c.Schema().Field(j+1)
		if rf.Name != cf.Name || !arrow.TypeEqual(rf.Type, cf.Type) {
			t.Fatalf("column %d: read %v, feed %v", j, rf, cf)
		}
		for i := 0; i < 3; i++ {
			a := array.NewSlice(r.Column(j), int64(i), int64(i+1))
			b := array.NewSlice(c.Column(j+1), int64(order[i]), int64(order[i]+1))
			if !array.Equal(a, b) {
				t.Errorf("%s row %d: read %v, feed %v", rf.Name, i, a, b)
			}
			a.Release()
			b.Release()
		}
	}
	for i := 0; i < 3; i++ {
		if op := c.Column(0).ValueStr(i); op != connectors.ChangeInsert {
			t.Fatalf("row %d: op %q", i, op)
		}
	}
}

// TestFeedTrackingOff: without change tracking the feed is unavailable,
// the error names the ALTER TABLE to run, and the table is left as it is.
func TestFeedTrackingOff(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	ctx := context.Background()
	if err := srv.CreateTable(ctx, items, itemCols, nil); err != nil {
		t.Fatal(err)
	}
	_, err := src.StartFeed(ctx, itemsFeed())
	if !errors.Is(err, connectors.ErrFeedUnavailable) || connectors.IsPermanent(err) {
		t.Fatalf("StartFeed: %v", err)
	}
	if hint := `ALTER TABLE "PUBLIC"."ITEMS" SET CHANGE_TRACKING = TRUE`; !strings.Contains(err.Error(), hint) {
		t.Fatalf("%v does not say %s", err, hint)
	}
	rows, err := src.textRows(ctx, "SHOW TABLES LIKE 'ITEMS'")
	if err != nil || len(rows) != 1 || rows[0]["change_tracking"] != "OFF" {
		t.Fatalf("SHOW TABLES after StartFeed: %v %v", rows, err)
	}
	if _, err := src.db.ExecContext(ctx, "ALTER TABLE "+items+" SET CHANGE_TRACKING = TRUE"); err != nil {
		t.Fatal(err)
	}
	if _, err := src.StartFeed(ctx, itemsFeed()); err != nil {
		t.Fatalf("after ALTER TABLE: %v", err)
	}
	q := itemsFeed()
	q.Table = connectors.Table{Query: "SELECT 1 AS ID"}
	if _, err := src.StartFeed(ctx, q); !errors.Is(err, connectors.ErrFeedUnavailable) {
		t.Fatalf("query: %v", err)
	}
	if _, err := src.StartFeed(ctx, connectors.Feed{Name: "x", Table: connectors.Table{Name: "PUBLIC.MISSING"}, Key: []string{"ID"}}); !errors.Is(err, connectors.ErrFeedUnavailable) {
		t.Fatalf("missing table (or a view): %v", err)
	}
}

// lost starts a feed, does what breaks it, and checks that Changes
// reports ErrFeedLost saying why, and that a new feed works again.
func lost(t *testing.T, why string, breakIt func(*sfserver.Server, *Source), restarts bool) {
	t.Helper()
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	f := itemsFeed()
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, srv, `DELETE FROM "ITEMS" WHERE ID = 1`)
	breakIt(srv, src)
	_, err = src.Changes(ctx, f, pos, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, connectors.ErrFeedLost) || !strings.Contains(err.Error(), why) {
		t.Fatalf("Changes: %v, want ErrFeedLost saying %q", err, why)
	}
	if !restarts {
		return
	}
	pos, err = src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	readSchema, _ := readAll(t, src, items, nil)
	exec(t, srv, `DELETE FROM "ITEMS" WHERE ID = 4`)
	if cs, _ := changes(t, src, f, pos, feedSchema(readSchema)); fmt.Sprint(opsOf(cs)) != "[delete 4]" {
		t.Fatalf("restarted feed: %v", opsOf(cs))
	}
}

func TestFeedLost(t *testing.T) {
	ctx := context.Background()
	alter := func(src *Source, sql string) {
		if _, err := src.db.ExecContext(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("beyond retention", func(t *testing.T) {
		lost(t, "Time travel data is not available", func(_ *sfserver.Server, src *Source) {
			alter(src, "ALTER TABLE "+items+" SET DATA_RETENTION_TIME_IN_DAYS = 0")
		}, false)
	})
	t.Run("recreated", func(t *testing.T) {
		lost(t, "dropped and created again", func(srv *sfserver.Server, src *Source) {
			if err := srv.DropTable(ctx, items); err != nil {
				t.Fatal(err)
			}
			if err := srv.CreateTable(ctx, items, itemCols, [][]any{{4, "four", nil, nil}}); err != nil {
				t.Fatal(err)
			}
			alter(src, "ALTER TABLE "+items+" SET CHANGE_TRACKING = TRUE")
		}, true)
	})
	t.Run("altered", func(t *testing.T) {
		lost(t, "columns of PUBLIC.ITEMS changed", func(srv *sfserver.Server, _ *Source) {
			if err := srv.AddColumn(ctx, items, sfserver.Column{Name: "EXTRA", Type: "INT"}); err != nil {
				t.Fatal(err)
			}
		}, true)
	})
	t.Run("tracking turned off and on", func(t *testing.T) {
		lost(t, "Change tracking is not enabled or has been missing", func(_ *sfserver.Server, src *Source) {
			alter(src, "ALTER TABLE "+items+" SET CHANGE_TRACKING = FALSE")
			alter(src, "ALTER TABLE "+items+" SET CHANGE_TRACKING = TRUE")
		}, true)
	})
	t.Run("tracking turned off", func(t *testing.T) {
		lost(t, "change tracking was turned off", func(_ *sfserver.Server, src *Source) {
			alter(src, "ALTER TABLE "+items+" SET CHANGE_TRACKING = FALSE")
		}, false)
	})
	t.Run("dropped", func(t *testing.T) {
		lost(t, "no longer exists", func(srv *sfserver.Server, _ *Source) {
			if err := srv.DropTable(ctx, items); err != nil {
				t.Fatal(err)
			}
		}, false)
	})
	t.Run("malformed position", func(t *testing.T) {
		srv := newServer(t, sfserver.Config{})
		src := feedSource(t, srv)
		trackedItems(t, srv, src)
		_, err := src.Changes(ctx, itemsFeed(), "0/16B3748;1;2", func(arrow.RecordBatch) error { return nil })
		if !errors.Is(err, connectors.ErrFeedLost) {
			t.Fatalf("Changes: %v", err)
		}
	})
}

// TestFeedConfirmAndDrop: ConfirmFeed and DropFeed change nothing in the
// warehouse (the feed holds nothing there), so a position confirmed is
// still readable again and change tracking stays on after a drop.
func TestFeedConfirmAndDrop(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	f := itemsFeed()
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, srv, `UPDATE "ITEMS" SET NAME = 'uno' WHERE ID = 1`)
	readSchema, _ := readAll(t, src, items, nil)
	first, next := changes(t, src, f, pos, feedSchema(readSchema))
	if err := src.ConfirmFeed(ctx, f, next); err != nil {
		t.Fatal(err)
	}
	if err := src.ConfirmFeed(ctx, f, pos); err != nil {
		t.Fatal(err)
	}
	again, _ := changes(t, src, f, pos, feedSchema(readSchema))
	if fmt.Sprint(first) != fmt.Sprint(again) || len(first) != 1 {
		t.Fatalf("replay from a confirmed position: %v, first %v", again, first)
	}
	if err := src.ConfirmFeed(ctx, f, "junk"); !errors.Is(err, connectors.ErrFeedLost) {
		t.Fatalf("ConfirmFeed of a malformed position: %v", err)
	}
	if err := src.DropFeed(ctx, f); err != nil {
		t.Fatal(err)
	}
	if err := src.DropFeed(ctx, f); err != nil {
		t.Fatalf("second DropFeed: %v", err)
	}
	if err := src.DropFeed(ctx, connectors.Feed{Name: `x"; DROP TABLE t`}); !errors.Is(err, connectors.ErrBadRequest) {
		t.Fatalf("DropFeed of a bad name: %v", err)
	}
	rows, err := src.textRows(ctx, "SHOW TABLES")
	if err != nil || len(rows) != 1 || rows[0]["change_tracking"] != "ON" {
		t.Fatalf("SHOW TABLES after DropFeed: %v %v", rows, err)
	}
	if cs, _ := changes(t, src, f, next, feedSchema(readSchema)); len(cs) != 0 {
		t.Fatalf("changes after the last position: %v", cs)
	}
}

// feedSource opens a source whose feeds read up to Snowflake's clock,
// so a change is seen by the next Changes call.
func feedSource(t *testing.T, srv *sfserver.Server) *Source {
	src := openSource(t, srv)
	src.feedLag = 0
	return src
}

// TestFeedLag: with the default lag a change made just now is left to
// the interval after, and read there.
func TestFeedLag(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := openSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	f := itemsFeed()
	time.Sleep(src.feedLag) // StartFeed's position is after tracking began
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	readSchema, _ := readAll(t, src, items, nil)
	exec(t, srv, `DELETE FROM "ITEMS" WHERE ID = 1`)
	cs, next := changes(t, src, f, pos, feedSchema(readSchema))
	if len(cs) != 0 {
		t.Fatalf("a change of this instant read already: %v", cs)
	}
	time.Sleep(src.feedLag + 100*time.Millisecond)
	if cs, _ := changes(t, src, f, next, feedSchema(readSchema)); fmt.Sprint(opsOf(cs)) != "[delete 1]" {
		t.Fatalf("next interval: %v", opsOf(cs))
	}
}

// TestChangesClause checks the local server's CHANGES clause against
// Snowflake's documented semantics, in plain Snowflake SQL: the net delta
// per row, an update as a DELETE and INSERT pair with METADATA$ISUPDATE
// and one METADATA$ROW_ID, a row inserted and deleted within the interval
// absent, and END bounding the interval.
func TestChangesClause(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	start, err := src.now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, srv,
		`UPDATE "ITEMS" SET NAME = 'uno' WHERE ID = 1`,
		`DELETE FROM "ITEMS" WHERE ID = 2`,
		`INSERT INTO "ITEMS" VALUES (5, 'five', NULL, NULL), (6, 'six', NULL, NULL)`,
		`DELETE FROM "ITEMS" WHERE ID = 6`)
	mid, err := src.now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, srv, `DELETE FROM "ITEMS" WHERE ID = 5`)
	query := func(end string) []string {
		rows, err := src.db.QueryContext(ctx, fmt.Sprintf(`SELECT ID, NAME, METADATA$ACTION, METADATA$ISUPDATE, METADATA$ROW_ID
			FROM ITEMS CHANGES(INFORMATION => DEFAULT) AT(TIMESTAMP => TO_TIMESTAMP_LTZ(%d, 9)) %s
			ORDER BY ID, METADATA$ACTION`, start.UnixNano(), end))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		rowIDs := map[string]string{}
		for rows.Next() {
			var id, name, action, rowID string
			var isUpdate bool
			if err := rows.Scan(&id, &name, &action, &isUpdate, &rowID); err != nil {
				t.Fatal(err)
			}
			if prev, ok := rowIDs[id]; ok && prev != rowID {
				t.Fatalf("row %s has row ids %s and %s", id, prev, rowID)
			}
			rowIDs[id] = rowID
			out = append(out, fmt.Sprintf("%s %s %s %v", id, name, action, isUpdate))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := "[1 one DELETE true 1 uno INSERT true 2 two DELETE false 5 five INSERT false]"
	if got := fmt.Sprint(query(fmt.Sprintf("END(TIMESTAMP => TO_TIMESTAMP_LTZ(%d, 9))", mid.UnixNano()))); got != want {
		t.Fatalf("to mid:\n%s\nwant\n%s", got, want)
	}
	want = "[1 one DELETE true 1 uno INSERT true 2 two DELETE false]"
	if got := fmt.Sprint(query("")); got != want {
		t.Fatalf("to now:\n%s\nwant\n%s", got, want)
	}
}

// TestFeedOddNames: a table whose name holds a quote and LIKE's
// wildcards, beside one the wildcards match, in a schema of its own.
func TestFeedOddNames(t *testing.T) {
	srv := newServer(t, sfserver.Config{})
	src := feedSource(t, srv)
	ctx := context.Background()
	odd := `"Odd Schema"."it's_%x"`
	for _, name := range []string{odd, `"Odd Schema"."IT'S_AX"`} {
		if err := srv.CreateTable(ctx, name, itemCols, [][]any{{1, "one", nil, nil}}); err != nil {
			t.Fatal(err)
		}
	}
	f := connectors.Feed{Name: "tributary_odd", Table: connectors.Table{Name: odd}, Key: []string{"ID"}}
	if _, err := src.StartFeed(ctx, f); !errors.Is(err, connectors.ErrFeedUnavailable) ||
		!strings.Contains(err.Error(), `ALTER TABLE "Odd Schema"."it's_%x" SET CHANGE_TRACKING = TRUE`) {
		t.Fatalf("StartFeed before tracking: %v", err)
	}
	if _, err := src.db.ExecContext(ctx, `ALTER TABLE `+odd+` SET CHANGE_TRACKING = TRUE`); err != nil {
		t.Fatal(err)
	}
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	readSchema, _ := readAll(t, src, odd, nil)
	if err := srv.Exec(ctx, odd, `UPDATE "Odd Schema"."it's_%x" SET NAME = 'uno'`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Exec(ctx, `"Odd Schema"."IT'S_AX"`, `DELETE FROM "Odd Schema"."IT'S_AX"`); err != nil {
		t.Fatal(err)
	}
	cs, _ := changes(t, src, f, pos, feedSchema(readSchema))
	if got := fmt.Sprint(cs); got != "[{update [1 uno (null) (null)]}]" {
		t.Fatalf("changes %s", got)
	}
}

// TestFeedChunks: changes spanning many result chunks keep their order
// (every delete first) and add up to the table.
func TestFeedChunks(t *testing.T) {
	srv := newServer(t, sfserver.Config{InlineRows: 5, ChunkRows: 7})
	src := feedSource(t, srv)
	trackedItems(t, srv, src)
	ctx := context.Background()
	f := itemsFeed()
	pos, err := src.StartFeed(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	readSchema, state := readAll(t, src, items, nil)
	exec(t, srv,
		`INSERT INTO "ITEMS" SELECT i, 'row ' || i, i / 100, NULL FROM range(100, 200) AS g(i)`,
		`DELETE FROM "ITEMS" WHERE ID % 3 = 0`,
		`UPDATE "ITEMS" SET NAME = NAME || '!' WHERE ID % 5 = 0`,
		`UPDATE "ITEMS" SET ID = ID + 1000 WHERE ID % 7 = 0`)
	cs, _ := changes(t, src, f, pos, feedSchema(readSchema))
	if len(cs) < 60 {
		t.Fatalf("%d changes", len(cs))
	}
	apply(t, state, cs)
	_, table := readAll(t, src, items, nil)
	sameState(t, "chunks", state, table)
	if st := srv.Stats(); st.Chunks < 5 {
		t.Fatalf("%d chunks fetched", st.Chunks)
	}
}
