package run

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/snowflake"
	"github.com/tributary-dev/tributary/connectors/snowflake/sfserver"
)

// The Mirror rounds on a Snowflake source, through the real driver and
// wire protocol against the local fake (sfserver, DuckDB inside): with
// change tracking on, runs after the first read the CHANGES feed (and
// re-diff by key when the table is dropped and recreated); with it off,
// every run is the keyed diff after the feed reports itself unavailable.
func TestMirrorSnowflake(t *testing.T) {
	for _, sc := range testStores(t) {
		for _, tracked := range []bool{true, false} {
			name := sc.name + "/tracking-off"
			if tracked {
				name = sc.name + "/tracking-on"
			}
			t.Run(name, func(t *testing.T) {
				srv, err := sfserver.New(sfserver.Config{Users: map[string]sfserver.User{"TESTER": {Password: "secret"}}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(srv.Close)
				wh := &sfWarehouse{srv: srv, tracked: tracked}
				reg := connectors.NewRegistry(snowflake.LocalKind(srv.Host(), srv.Port(), 0))
				f := newMirrorFixtureOn(t, sc.open(t), wh, reg,
					func(k string) (string, bool) { return "secret", k == "SF_PASSWORD" },
					fmt.Sprintf("source: {kind: snowflake, account: %s, user: tester, password: \"${SF_PASSWORD}\", database: TESTDB, schema: PUBLIC}\n", srv.Account())+
						"table_params: {table: ev}\n")
				mirrorEventRounds(f)
				// Which path ran: a run served by the feed reads only the
				// changed rows, the keyed diff reads the whole table.
				f.exec(`INSERT INTO ev VALUES (7, 'u7', '2024-04-01 00:00:00', 'pro', 7, NULL), (8, 'u8', '2024-04-01 00:00:00', NULL, 8, 'x')`)
				f.sync("after truncation", 2, 0, 0)
				f.exec(`UPDATE ev SET n = 9 WHERE id = 8`)
				st := f.sync("one update", 0, 1, 0)
				f.wantEvents("one update")
				if want := map[bool]int64{true: 1, false: 2}[tracked]; st.RowsRead != want {
					t.Fatalf("change tracking %v: the last run read %d rows, want %d", tracked, st.RowsRead, want)
				}
			})
		}
	}
}

// sfWarehouse runs the rounds' SQL on the fake's table EV: DML through
// srv.Exec (which records tracked changes), DDL through its fixture calls.
type sfWarehouse struct {
	srv     *sfserver.Server
	tracked bool
}

const sfEv = "TESTDB.PUBLIC.EV"

// sfEvCols is mirrorEventTable's ev in Snowflake types, names quoted
// lower case as the import names them.
var sfEvCols = []sfserver.Column{
	{Name: "id", Type: "NUMBER(38,0)", NotNull: true, PrimaryKey: true},
	{Name: "uid", Type: "VARCHAR(20)"},
	{Name: "t", Type: "TIMESTAMP_NTZ(9)", NotNull: true},
	{Name: "plan", Type: "VARCHAR(20)"},
	{Name: "n", Type: "NUMBER(38,0)"},
}

func (w *sfWarehouse) exec(t *testing.T, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range stmts {
		var err error
		switch {
		case strings.HasPrefix(s, "CREATE TABLE ev ("):
			cols := sfEvCols
			if strings.Contains(s, "extra") {
				cols = append(cols[:len(cols):len(cols)], sfserver.Column{Name: "extra", Type: "VARCHAR(20)"})
			}
			if err = w.srv.CreateTable(ctx, "EV", cols, nil); err == nil && w.tracked {
				err = w.srv.SetChangeTracking(ctx, "EV", true)
			}
		case strings.HasPrefix(s, "ALTER TABLE ev ADD COLUMN extra"):
			err = w.srv.AddColumn(ctx, "EV", sfserver.Column{Name: "extra", Type: "VARCHAR(20)"})
		case s == "DROP TABLE ev":
			err = w.srv.DropTable(ctx, "EV")
		// The recreation keeps the rows aside in the fake's own scratch schema.
		case s == "CREATE TABLE ev2 AS SELECT * FROM ev":
			_, err = w.srv.DB().ExecContext(ctx, "CREATE OR REPLACE TABLE memory.results.ev_keep AS SELECT * FROM "+sfEv)
		case s == "INSERT INTO ev SELECT * FROM ev2":
			err = w.srv.Exec(ctx, "EV", "INSERT INTO EV SELECT * FROM memory.results.ev_keep")
		case s == "DROP TABLE ev2":
			_, err = w.srv.DB().ExecContext(ctx, "DROP TABLE memory.results.ev_keep")
		default:
			err = w.srv.Exec(ctx, "EV", s)
		}
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func (w *sfWarehouse) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	q = strings.Replace(q, "FROM ev", "FROM "+sfEv, 1)
	rows, err := w.srv.DB().QueryContext(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, c := range cols {
			// NUMBER columns are DuckDB decimals in the fake.
			if d, ok := vals[i].(interface{ Float64() float64 }); ok {
				vals[i] = d.Float64()
			}
			if s, ok := cellText(vals[i]); ok {
				m[c] = s
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
