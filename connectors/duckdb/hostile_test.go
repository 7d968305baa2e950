package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// hostileEnv is a server's data dir with a store file and its write log,
// another DuckDB file, an allowed directory and a warehouse, as a
// project user attacking through an import's query would find them.
type hostileEnv struct {
	dir, allowed, store, storeLog, other, wh string
	opts                                     connectors.Options
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	dir := t.TempDir()
	e := &hostileEnv{dir: dir, allowed: filepath.Join(dir, "allowed"),
		store: filepath.Join(dir, "data", "tributary.duckdb"), other: filepath.Join(dir, "other.duckdb"),
		wh: filepath.Join(dir, "wh.duckdb")}
	e.storeLog = e.store + ".log"
	for _, d := range []string{e.allowed, e.storeLog, filepath.Join(dir, "imports")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, text string) {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(e.allowed, "ok.csv"), "id,name\n1,a\n2,b\n")
	write(filepath.Join(e.storeLog, "000001.seg"), "project 1 raw events: secret\n")
	if err := os.Symlink("/etc/passwd", filepath.Join(e.allowed, "passwd.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.storeLog, filepath.Join(e.allowed, "log")); err != nil {
		t.Fatal(err)
	}
	for path, ddl := range map[string]string{
		e.store: "CREATE TABLE events AS SELECT 1 AS project, 'secret' AS name; CREATE SEQUENCE event_seq",
		e.other: "CREATE TABLE keep AS SELECT 1 AS x",
		e.wh:    "CREATE TABLE t AS SELECT i AS id FROM range(3) r(i); CREATE SEQUENCE s",
	} {
		db, err := sql.Open("duckdb", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ddl); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	e.opts = connectors.Options{AllowedPaths: []string{e.allowed}, ServerPaths: []string{e.store, filepath.Join(dir, "imports")}}
	return e
}

// table counts the rows of table in the DuckDB file at path, opened
// read-only on its own (so the check does not go through a source).
func rowsOf(t *testing.T, path, table string) int {
	t.Helper()
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("%s in %s: %v", table, path, err)
	}
	return n
}

func absent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (%v): a statement wrote it", path, err)
	}
}

// Every probe of the issue, and their neighbours, against a warehouse
// opened read-write (the weakest setting) and an in-memory source.
func TestHostileQueries(t *testing.T) {
	e := newHostileEnv(t)
	for _, tc := range []struct {
		name   string
		fields map[string]string
	}{
		{"read-write file", map[string]string{"path": e.wh, "read_only": "false"}},
		{"read-only file", map[string]string{"path": e.wh}},
		{"in-memory", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Open(context.Background(), tc.fields, e.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			// The allowed file reads: the refusals below are the limits', not a broken source.
			_, rows, err := sourcetest.Rows(context.Background(), src, connectors.ReadRequest{Table: connectors.Table{Name: filepath.Join(e.allowed, "ok.csv")}})
			if err != nil || len(rows) != 2 {
				t.Fatalf("allowed file: %d rows, %v", len(rows), err)
			}
			seq := func() string {
				var v sql.NullInt64
				_ = src.db.QueryRow("SELECT last_value FROM duckdb_sequences() WHERE sequence_name = 's'").Scan(&v)
				return fmt.Sprint(v)
			}
			seq0 := seq()
			whRows := 0
			if tc.fields["path"] != "" {
				whRows = rowsOfSource(t, src, "t")
			}
			unchanged := func(t *testing.T) {
				absent(t, filepath.Join(e.allowed, "out.csv"))
				absent(t, filepath.Join(e.dir, "out.csv"))
				absent(t, filepath.Join(e.allowed, "export"))
				if n := rowsOf(t, e.other, "keep"); n != 1 {
					t.Errorf("other.duckdb keep: %d rows", n)
				}
				if s := seq(); s != seq0 {
					t.Errorf("sequence moved from %s to %s", seq0, s)
				}
				if tc.fields["path"] != "" {
					if n := rowsOfSource(t, src, "t"); n != whRows {
						t.Errorf("warehouse table t: %d rows, had %d", n, whRows)
					}
				}
			}
			q := func(sql string) connectors.Table { return connectors.Table{Query: sql} }
			spill, _ := filepath.Abs(".tmp") // DuckDB's default temp directory in memory
			probes := []sourcetest.Probe{
				{Name: "read_text /etc/passwd", Table: q("SELECT * FROM read_text('/etc/passwd')")},
				{Name: "read_blob store write log", Table: q("SELECT * FROM read_blob('" + e.storeLog + "/*')")},
				{Name: "store file by replacement scan", Table: q("SELECT * FROM '" + e.store + "'")},
				{Name: "glob of the root", Table: q("SELECT * FROM glob('/*')")},
				{Name: "spill files of other in-memory sources", Table: q("SELECT * FROM read_blob('" + spill + "/*')")},
				{Name: "dot-dot out of the allowed dir", Table: q("SELECT * FROM read_text('" + e.allowed + "/../data/tributary.duckdb.log/000001.seg')")},
				{Name: "symlink out of the allowed dir", Table: q("SELECT * FROM read_csv('" + e.allowed + "/passwd.csv')")},
				{Name: "table names the write log", Table: connectors.Table{Name: e.storeLog + "/*"}},
				{Name: "table names /etc/passwd", Table: connectors.Table{Name: "/etc/passwd"}},
				{Name: "table via a symlink into the write log", Table: connectors.Table{Name: e.allowed + "/log/*"}},
				{Name: "ATTACH another file", Table: q("ATTACH '" + e.other + "' AS o"), Unchanged: unchanged},
				{Name: "ATTACH then DROP", Table: q("ATTACH '" + e.other + "' AS o; DROP TABLE o.keep"), Unchanged: unchanged},
				{Name: "COPY TO an allowed dir", Table: q("COPY (SELECT 1) TO '" + e.allowed + "/out.csv'"), Unchanged: unchanged},
				{Name: "COPY TO elsewhere", Table: q("COPY (SELECT 1) TO '" + e.dir + "/out.csv'"), Unchanged: unchanged},
				{Name: "EXPORT DATABASE", Table: q("EXPORT DATABASE '" + e.allowed + "/export'"), Unchanged: unchanged},
				{Name: "statements after a SELECT", Table: q("SELECT 1; COPY (SELECT 1) TO '" + e.allowed + "/out.csv'"), Unchanged: unchanged},
				{Name: "breaking out of the wrapping", Table: q("SELECT 1) AS q; DROP TABLE t; SELECT * FROM (SELECT 1"), Unchanged: unchanged},
				{Name: "DROP through query()", Table: q("SELECT * FROM query('DROP TABLE t')"), Unchanged: unchanged},
				{Name: "nextval", Table: q("SELECT nextval('s')"), Unchanged: unchanged},
				{Name: "INSTALL", Table: q("INSTALL httpfs")},
				{Name: "LOAD", Table: q("LOAD httpfs")},
				{Name: "SET external access back on", Table: q("SET enable_external_access = true")},
				{Name: "SET threads", Table: q("SET threads = 1")},
				{Name: "DELETE", Table: q("DELETE FROM t"), Unchanged: unchanged},
				{Name: "CHECKPOINT", Table: q("CHECKPOINT")},
			}
			if tc.fields["path"] == "" {
				// The in-memory source has no t or s: only the effects that do not need them.
				for i := range probes {
					if strings.Contains(probes[i].Name, "DROP") || probes[i].Name == "nextval" || probes[i].Name == "DELETE" {
						probes[i].Table = q("SELECT 1; CREATE TABLE x AS SELECT 1")
					}
				}
			}
			sourcetest.RunHostile(t, src, probes)
		})
	}
}

func rowsOfSource(t *testing.T, src *Source, table string) int {
	t.Helper()
	var n int
	if err := src.db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// What Open itself refuses: the store (directly, by a link, its write
// log), an in-memory source without allowed paths, allowed paths that
// hold the server's files.
func TestHostileOpen(t *testing.T) {
	e := newHostileEnv(t)
	link := filepath.Join(e.dir, "innocent.duckdb")
	if err := os.Symlink(e.store, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		opts   connectors.Options
		want   string
	}{
		{"store file", map[string]string{"path": e.store}, e.opts, "source.path"},
		{"store file read-write", map[string]string{"path": e.store, "read_only": "false"}, e.opts, "source.path"},
		{"store by a symlink", map[string]string{"path": link}, e.opts, "source.path"},
		{"new file inside the write log", map[string]string{"path": e.storeLog + "/x.duckdb", "read_only": "false"}, e.opts, "source.path"},
		{"imports dir", map[string]string{"path": filepath.Join(e.dir, "imports", "x.duckdb"), "read_only": "false"}, e.opts, "source.path"},
		{"DuckDB options after ?", map[string]string{"path": e.wh + "?access_mode=read_write&lock_configuration=true"}, e.opts, "source.path"},
		{"in-memory without allowed paths", map[string]string{}, connectors.Options{ServerPaths: e.opts.ServerPaths}, "allowed_paths"},
		{"allowed path holding the data dir", map[string]string{"path": e.wh},
			connectors.Options{AllowedPaths: []string{e.dir}, ServerPaths: e.opts.ServerPaths}, "allowed_paths[0]"},
		{"allowed path inside the write log", map[string]string{"path": e.wh},
			connectors.Options{AllowedPaths: []string{e.storeLog}, ServerPaths: e.opts.ServerPaths}, "allowed_paths[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Open(context.Background(), tc.fields, tc.opts)
			if err == nil {
				src.Close()
				t.Fatal("opened")
			}
			refusal := errors.Is(err, connectors.ErrRefused) || errors.As(err, new(*connectors.FieldError))
			if !refusal || !connectors.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want a permanent refusal naming %s", err, tc.want)
			}
		})
	}
	absent(t, e.storeLog+"/x.duckdb")
	if n := rowsOf(t, e.store, "events"); n != 1 {
		t.Fatalf("store events: %d", n)
	}
}

// The limits are the database's, not one connection's: a second
// connection of the pool is bound by them too.
func TestConfinementHoldsOnEveryConnection(t *testing.T) {
	e := newHostileEnv(t)
	src, err := Open(context.Background(), map[string]string{"path": e.wh}, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx := context.Background()
	held, err := src.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fresh, err := src.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, stmt := range []string{"SET enable_external_access = true", "SET lock_configuration = false",
		"SELECT * FROM read_text('/etc/passwd')", "ATTACH '" + e.other + "' AS o"} {
		for name, c := range map[string]*sql.Conn{"held": held, "fresh": fresh} {
			if _, err := c.ExecContext(ctx, stmt); err == nil {
				t.Errorf("%s connection ran %s", name, stmt)
			}
		}
	}
}

// Sources of one file share DuckDB's database instance within a process:
// a second source (a second import of the same warehouse) opens under the
// same limits; one under other limits is refused rather than widened.
func TestSharedInstance(t *testing.T) {
	e := newHostileEnv(t)
	ctx := context.Background()
	// Opened at once, as the scheduler starts several imports of one file.
	srcs := make([]*Source, 6)
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for i := range srcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srcs[i], errs[i] = Open(ctx, map[string]string{"path": e.wh}, e.opts)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
		defer srcs[i].Close()
	}
	for i, src := range srcs {
		if _, rows, err := sourcetest.Rows(ctx, src, connectors.ReadRequest{Table: connectors.Table{Name: "main.t"}}); err != nil || len(rows) != 3 {
			t.Errorf("source %d: %d rows, %v", i, len(rows), err)
		}
		if _, err := src.Discover(ctx, connectors.Table{Query: "SELECT * FROM read_text('/etc/passwd')"}); !errors.Is(err, connectors.ErrRefused) {
			t.Errorf("source %d read /etc/passwd: %v", i, err)
		}
	}
	if src, err := Open(ctx, map[string]string{"path": e.wh}, connectors.Options{AllowedPaths: []string{t.TempDir()}}); err == nil {
		src.Close()
		t.Error("a source under other allowed paths shared the confined instance")
	}
}
