package postgres

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
)

func TestDiscover(t *testing.T) {
	db := newDB(t)
	src := db.open(t)
	db.exec(t, `CREATE SCHEMA "Sales"`)
	// Key order (b, "Event Time") differs from column order; a dropped
	// column leaves a hole in the attribute numbers.
	db.exec(t, `CREATE TABLE "Sales"."Orders" (gone int, a text, b bigint NOT NULL, "Event Time" timestamptz NOT NULL,
		amount numeric(10,3), tags varchar(20)[], PRIMARY KEY (b, "Event Time"))`)
	db.exec(t, `ALTER TABLE "Sales"."Orders" DROP COLUMN gone`)
	db.exec(t, `CREATE VIEW "Sales".v AS SELECT b, a FROM "Sales"."Orders"`)
	db.exec(t, `CREATE TABLE nokey (x int NOT NULL)`)
	ctx := context.Background()

	s, err := src.Discover(ctx, connectors.Table{Name: "Sales.Orders"})
	if err != nil {
		t.Fatal(err)
	}
	type col struct {
		Name, Type, SourceType string
		Nullable               bool
	}
	var got []col
	for _, c := range s.Columns {
		got = append(got, col{c.Name, c.Type.String(), c.SourceType, c.Nullable})
	}
	want := []col{
		{"a", "utf8", "text", true},
		{"b", "int64", "bigint", false},
		{"Event Time", "timestamp[us, tz=UTC]", "timestamp with time zone", false},
		{"amount", "decimal(10, 3)", "numeric(10,3)", true},
		{"tags", "list<item: utf8, nullable>", "character varying(20)[]", true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("columns\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(s.PrimaryKey, []string{"b", "Event Time"}) {
		t.Errorf("primary key %q, want [b \"Event Time\"] in key order", s.PrimaryKey)
	}

	v, err := src.Discover(ctx, connectors.Table{Name: "Sales.v"})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Columns) != 2 || !v.Columns[0].Nullable || v.PrimaryKey != nil {
		t.Errorf("view: %+v, want nullable columns and no key", v)
	}
	n, err := src.Discover(ctx, connectors.Table{Name: "nokey"})
	if err != nil || n.Columns[0].Nullable || n.PrimaryKey != nil {
		t.Errorf("unqualified table without key: %+v, %v", n, err)
	}
	q, err := src.Discover(ctx, connectors.Table{Query: `SELECT b, b + 1 AS c FROM "Sales"."Orders"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Columns) != 2 || !q.Columns[0].Nullable || q.Columns[1].SourceType != "bigint" {
		t.Errorf("query: %+v, want nullable columns", q.Columns)
	}

	for _, missing := range []connectors.Table{{Name: "no_such_table"}, {Name: "no_such_schema.t"}, {Query: "SELECT no_such_column FROM nokey"}} {
		_, err := src.Discover(ctx, missing)
		if !errors.Is(err, connectors.ErrNotFound) || !connectors.IsPermanent(err) {
			t.Errorf("%+v: err %v, want ErrNotFound (permanent)", missing, err)
		}
	}
	if _, err := src.Discover(ctx, connectors.Table{Query: "SELEC 1"}); !connectors.IsPermanent(err) {
		t.Errorf("syntax error: %v, want permanent", err)
	}
	err = src.Read(ctx, connectors.ReadRequest{Table: connectors.Table{Name: "nokey"}, OrderBy: []string{"nope"}}, nil)
	if !errors.Is(err, connectors.ErrNotFound) {
		t.Errorf("read ordered by a missing column: %v, want ErrNotFound", err)
	}
}

// TestOpenErrors checks which connection failures a sync may retry.
func TestOpenErrors(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	cases := []struct {
		name      string
		dsn       string
		permanent bool
		notFound  bool
	}{
		{"missing database", db.dsn + " dbname=tributary_no_such_db", true, true},
		{"missing role", db.dsn + " user=tributary_no_such_role", true, false},
		{"TLS not verifiable", db.dsn + " sslmode=verify-full", true, false},
		{"nothing listening", "host=127.0.0.1 port=1 sslmode=disable connect_timeout=2", false, false},
	}
	for _, c := range cases {
		src, err := Open(ctx, map[string]string{"dsn": c.dsn})
		if err == nil {
			src.Close()
			t.Errorf("%s: Open succeeded", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		if connectors.IsPermanent(err) != c.permanent || errors.Is(err, connectors.ErrNotFound) != c.notFound {
			t.Errorf("%s: %v: permanent=%v notFound=%v, want %v %v", c.name, err,
				connectors.IsPermanent(err), errors.Is(err, connectors.ErrNotFound), c.permanent, c.notFound)
		}
	}
	// sslmode=require encrypts without verifying: the local server's
	// self-signed certificate is accepted.
	var ssl string
	if err := db.conn.QueryRow(ctx, "SHOW ssl").Scan(&ssl); err == nil && ssl == "on" {
		src, err := Open(ctx, map[string]string{"dsn": db.dsn + " sslmode=require"})
		if err != nil {
			t.Errorf("sslmode=require: %v", err)
		} else {
			src.Close()
		}
	}
}
