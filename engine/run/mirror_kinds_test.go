package run

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/pgtest"
)

// The Mirror rounds of mirrorEventRounds (updates, deletes, ties, NULLs,
// a column added, a key deleted and inserted again, a table dropped and
// recreated, a truncation) on every source kind this package can run
// for real: a DuckDB table (TestMirrorEvents), a PostgreSQL table, and
// Parquet files read through DuckDB (rewritten whole each round, keyed by
// key_columns as files have no primary key). Snowflake and BigQuery run
// the same rounds in mirror_snowflake_test.go and mirror_bigquery_test.go.
func TestMirrorSourceKinds(t *testing.T) {
	for _, sc := range testStores(t) {
		t.Run(sc.name+"/postgres", func(t *testing.T) {
			db := pgtest.Database(t, "tributary_mirror", "the Mirror rounds on a postgres source are")
			f := newMirrorFixtureOn(t, sc.open(t), &pgWarehouse{db: db}, kinds.Registry(),
				func(k string) (string, bool) { return db.DSN, k == "MIRROR_PG_DSN" },
				`source: {kind: postgres, dsn: "${MIRROR_PG_DSN}"}`+"\ntable_params: {table: ev}\n")
			mirrorEventRounds(f)
		})
		t.Run(sc.name+"/parquet", func(t *testing.T) {
			dir := t.TempDir()
			wh := &parquetWarehouse{db: filepath.Join(dir, "scratch.duckdb"), file: filepath.Join(dir, "ev.parquet")}
			reg := kinds.RegistryWith(connectors.Options{AllowedPaths: []string{dir}})
			f := newMirrorFixtureOn(t, sc.open(t), wh, reg, nil,
				fmt.Sprintf("source: {kind: duckdb}\ntable_params: {table: %q}\nkey_columns: [id]\n", wh.file))
			mirrorEventRounds(f)
		})
	}
}

// newMirrorFixtureOn mirrors table ev of wh (created as mirrorEventTable)
// through the source and table_params YAML given.
func newMirrorFixtureOn(t *testing.T, st store.Store, wh warehouse, reg *connectors.Registry, lookup func(string) (string, bool), source string) *mirrorFixture {
	t.Helper()
	f := &mirrorFixture{t: t, st: st, wh: wh, reg: reg}
	f.exec(mirrorEventTable...)
	im, err := importspec.Parse("mirror.yaml", []byte("id: ev-mirror\nproject_id: 1\nsync_mode: mirror\nimport_type: event_stream\n"+
		"event_name: ev\ntime_column_name: t\nuser_column_name: uid\n"+source), reg, lookup)
	if err != nil {
		t.Fatal(err)
	}
	f.im = im
	return f
}

type pgWarehouse struct{ db pgtest.DB }

func (w *pgWarehouse) exec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := w.db.Conn.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func (w *pgWarehouse) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	// Not a cached statement: the table's columns change between rounds.
	rows, err := w.db.Conn.Query(context.Background(), q, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for i, fd := range rows.FieldDescriptions() {
			if s, ok := cellText(vals[i]); ok {
				m[fd.Name] = s
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// cellText formats a value as the DuckDB fixture's query does.
func cellText(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case time.Time:
		return v.UTC().Format("2006-01-02T15:04:05Z"), true
	}
	return fmt.Sprint(v), true
}

// parquetWarehouse keeps table ev in a scratch DuckDB file and writes it
// out whole as one Parquet file after every change.
type parquetWarehouse struct{ db, file string }

func (w *parquetWarehouse) exec(t *testing.T, stmts ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", w.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	tmp := w.file + ".tmp"
	if _, err := db.Exec(fmt.Sprintf(`COPY (SELECT * FROM ev) TO '%s' (FORMAT parquet)`, tmp)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, w.file); err != nil {
		t.Fatal(err)
	}
}

func (w *parquetWarehouse) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	f := &mirrorFixture{t: t, whPath: w.db}
	return f.query(q)
}
