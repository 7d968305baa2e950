package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/sourcetest"
)

// Queries a project user could put in an import, against a source that
// connects as the superuser (the test server's; the weakest setting):
// the read-only transaction and the one-statement Parse refuse every
// write, and nothing changes.
func TestHostileQueries(t *testing.T) {
	db := newDB(t)
	db.exec(t, "CREATE TABLE t AS SELECT g AS id FROM generate_series(1, 3) g")
	db.exec(t, "CREATE SEQUENCE event_seq")
	db.exec(t, "SELECT nextval('event_seq')")
	src := db.open(t)
	ctx := context.Background()
	var seq0, lo0 int64
	state := func() (seq, los, rows int64) {
		t.Helper()
		if err := db.conn.QueryRow(ctx, "SELECT last_value FROM event_seq").Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if err := db.conn.QueryRow(ctx, "SELECT count(*) FROM pg_largeobject_metadata").Scan(&los); err != nil {
			t.Fatal(err)
		}
		if err := db.conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return seq, los, rows
	}
	seq0, lo0, _ = state()
	unchanged := func(t *testing.T) {
		if seq, los, rows := state(); seq != seq0 || los != lo0 || rows != 3 {
			t.Errorf("sequence %d (was %d), large objects %d (were %d), rows of t %d (were 3)", seq, seq0, los, lo0, rows)
		}
	}
	// A query that only changes session settings runs, and changes
	// nothing the next statement sees: the rollback undoes it.
	if _, _, err := sourcetest.Rows(ctx, src, connectors.ReadRequest{Table: connectors.Table{
		Query: "SELECT set_config('default_transaction_read_only', 'off', false) AS s"}}); err != nil {
		t.Fatal(err)
	}
	q := func(sql string) connectors.Table { return connectors.Table{Query: sql} }
	sourcetest.RunHostile(t, src, []sourcetest.Probe{
		{Name: "nextval", Table: q("SELECT nextval('event_seq')"), RunsOnRead: true, Unchanged: unchanged},
		{Name: "setval", Table: q("SELECT setval('event_seq', 1)"), RunsOnRead: true, Unchanged: unchanged},
		{Name: "lo_create", Table: q("SELECT lo_create(0)"), MayRun: true, Unchanged: unchanged},
		{Name: "lo_from_bytea", Table: q("SELECT lo_from_bytea(0, 'x')"), MayRun: true, Unchanged: unchanged},
		{Name: "read-write mode mid-transaction", Table: q("SELECT set_config('transaction_read_only', 'off', true), nextval('event_seq')"), RunsOnRead: true, Unchanged: unchanged},
		{Name: "breaking out of the wrapping", Table: q("SELECT 1) AS q; DELETE FROM t; SELECT * FROM (SELECT 1"), Unchanged: unchanged},
		{Name: "statements after a SELECT", Table: q("SELECT 1; DELETE FROM t"), Unchanged: unchanged},
		{Name: "trailing comment", Table: q("SELECT 1) AS q; DELETE FROM t; --"), Unchanged: unchanged},
		{Name: "data-modifying CTE", Table: q("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d"), Unchanged: unchanged},
		{Name: "DELETE", Table: q("DELETE FROM t RETURNING *"), Unchanged: unchanged},
		{Name: "COPY TO a file", Table: q("COPY t TO '/tmp/tributary-hostile-copy.csv'"), Unchanged: unchanged},
	})
}

// The server's files are the role's privileges' to guard: a source
// should connect as a role with SELECT grants only, and then
// pg_read_file and friends are refused. (As superuser they would read;
// OpenWith logs a warning for that, checked here too.)
func TestHostileFunctionsNeedPrivileges(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	role := "ro_" + db.name
	db.exec(t, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		db.conn.Exec(ctx, "DROP OWNED BY "+role)
		db.conn.Exec(ctx, "DROP ROLE "+role)
	})
	db.exec(t, "CREATE TABLE t AS SELECT 1 AS id")
	db.exec(t, "GRANT SELECT ON t TO "+role)
	src, err := Open(ctx, map[string]string{"dsn": db.dsn + " user=" + role})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, rows, err := sourcetest.Rows(ctx, src, connectors.ReadRequest{Table: connectors.Table{Name: "t"}}); err != nil || len(rows) != 1 {
		t.Fatalf("granted table: %d rows, %v", len(rows), err)
	}
	q := func(sql string) connectors.Table { return connectors.Table{Query: sql} }
	sourcetest.RunHostile(t, src, []sourcetest.Probe{
		{Name: "pg_read_file", RunsOnRead: true, Table: q("SELECT pg_read_file('/etc/passwd')")},
		{Name: "pg_ls_dir", RunsOnRead: true, Table: q("SELECT pg_ls_dir('/')")},
		{Name: "lo_import", RunsOnRead: true, Table: q("SELECT lo_import('/etc/passwd')")},
		{Name: "table without grant", RunsOnRead: true, Table: q("SELECT * FROM pg_authid")},
	})

	var logs bytes.Buffer
	super, err := OpenWith(ctx, map[string]string{"dsn": db.dsn}, connectors.Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	super.Close()
	if !strings.Contains(logs.String(), "superuser") {
		t.Errorf("no superuser warning logged: %q", logs.String())
	}
}

// A failed connection's error does not tell an open port from a closed
// one: the same text whatever answered, the cause in the log only.
func TestConnectErrorsAreOpaque(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	var logs bytes.Buffer
	opts := connectors.Options{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	msgs := map[string]string{}
	for name, dsn := range map[string]string{
		"closed port":        "host=127.0.0.1 port=1 sslmode=disable connect_timeout=2",
		"open, not postgres": "host=127.0.0.1 port=" + nonPostgresPort(t) + " sslmode=disable connect_timeout=2",
		"postgres, bad role": db.dsn + " user=tributary_no_such_role",
	} {
		_, err := OpenWith(ctx, map[string]string{"dsn": dsn}, opts)
		if err == nil {
			t.Fatalf("%s: connected", name)
		}
		msgs[name] = strings.TrimSuffix(err.Error(), ": ")
		for _, leak := range []string{"refused", "EOF", "127.0.0.1", "role", "dial", "tributary_no_such_role"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%s: error %q says %q", name, err, leak)
			}
		}
	}
	if msgs["closed port"] != msgs["open, not postgres"] {
		t.Errorf("closed port %q and open port %q differ", msgs["closed port"], msgs["open, not postgres"])
	}
	if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "tributary_no_such_role") {
		t.Errorf("the causes are not in the log: %s", logs.String())
	}
}

// nonPostgresPort listens on a loopback port that answers every
// connection with a line of text and hangs up, as an SSH or HTTP server
// would, until the test ends.
func nonPostgresPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			c.Close()
		}
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
