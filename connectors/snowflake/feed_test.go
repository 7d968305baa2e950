package snowflake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

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
