package snowflake

import (
	"context"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// A query that closes the subquery it is wrapped in and adds statements
// of its own is refused by the server's statement count before any runs:
// the source asks for MULTI_STATEMENT_COUNT=1 on every request. (The
// local server counts with DuckDB's parser, as Snowflake counts with its
// own.) The account here allows any number, so only the source's own
// parameter stands in the way. A non-SELECT inside the subquery does not
// parse.
func TestHostileQueries(t *testing.T) {
	srv := newServer(t, sfserver.Config{AnyStatementCount: true})
	if err := createSeries(srv, "t", 3); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, srv)
	ctx := context.Background()
	unchanged := func(t *testing.T) {
		_, rows, err := sourcetest.Rows(ctx, src, connectors.ReadRequest{Table: connectors.Table{Name: "PUBLIC.T"}})
		if err != nil || len(rows) != 3 {
			t.Errorf("table T after the probe: %d rows, %v", len(rows), err)
		}
	}
	unchanged(t)
	q := func(sql string) connectors.Table { return connectors.Table{Query: sql} }
	sourcetest.RunHostile(t, src, []sourcetest.Probe{
		{Name: "breaking out of the wrapping", Table: q(`SELECT 1 AS x) AS q; DROP TABLE "TESTDB"."PUBLIC"."T"; SELECT * FROM (SELECT 1 AS x`), Unchanged: unchanged},
		{Name: "trailing comment", Table: q(`SELECT 1 AS x) AS q; DELETE FROM "TESTDB"."PUBLIC"."T"; --`), Unchanged: unchanged},
		{Name: "DELETE", Table: q(`DELETE FROM "TESTDB"."PUBLIC"."T"`), Unchanged: unchanged},
	})
}
