package snowflake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
)

// When the feed is unavailable or lost, what ConfirmFeed and DropFeed do,
// the lag, the fake's CHANGES clause, odd names and chunked results.
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
