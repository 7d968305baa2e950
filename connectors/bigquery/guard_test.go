package bigquery

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
)

func TestHasStatementSeparator(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT 1", false},
		{"SELECT ';' AS s, \";\" AS d, `a;b` FROM t", false},
		{"SELECT '''a;\n''' , \"\"\";\"\"\"", false},
		{`SELECT 'it\'s; fine'`, false},
		{`SELECT r'\'; DELETE FROM t; '`, false}, // one raw literal: \' does not end it
		{"SELECT 1 -- ; a comment\n", false},
		{"SELECT 1 # ; a comment", false},
		{"SELECT /* ; */ 1", false},
		{"SELECT 1; SELECT 2", true},
		{"SELECT 1) AS q; DELETE FROM d.t WHERE true; SELECT * FROM (SELECT 1", true},
		{"SELECT 'a' ; DROP TABLE d.t", true},
		{"SELECT 1 -- c\n; DELETE FROM d.t", true},
		{"SELECT /* c */; DELETE FROM d.t", true},
	} {
		if got := hasStatementSeparator(tc.sql); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// What BigQuery's own parser says in the dry run decides, before any
// job that would run: DML, DDL and scripts are refused; no job but the
// dry run is inserted. (The stub plays the parser; the client library
// and its requests are real.)
func TestQueryMustBeOneSelect(t *testing.T) {
	env := newStubEnv(t)
	env.rest.statementType = func(sql string) string {
		switch {
		case strings.HasPrefix(sql, "DELETE"):
			return "DELETE"
		case strings.HasPrefix(sql, "CREATE"):
			return "CREATE_TABLE_AS_SELECT"
		case strings.HasPrefix(sql, "EXPORT"):
			return "EXPORT_DATA"
		}
		return "SELECT"
	}
	src, err := env.open(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, sql := range []string{
		"DELETE FROM d.t WHERE true",
		"CREATE TABLE d.copy AS SELECT * FROM d.t",
		"EXPORT DATA OPTIONS(uri='gs://b/*') AS SELECT 1",
		"SELECT 1) AS q; DELETE FROM d.t WHERE true; SELECT * FROM (SELECT 1",
	} {
		env.rest.mu.Lock()
		env.rest.jobs = 0
		env.rest.mu.Unlock()
		table := connectors.Table{Query: sql}
		_, derr := src.Discover(ctx, table)
		rerr := src.Read(ctx, connectors.ReadRequest{Table: table}, nil)
		for op, err := range map[string]error{"Discover": derr, "Read": rerr} {
			if !errors.Is(err, connectors.ErrRefused) || !connectors.IsPermanent(err) || !strings.Contains(err.Error(), "table_params.query") {
				t.Errorf("%s %q: %v; want a permanent ErrRefused naming table_params.query", op, sql, err)
			}
		}
		env.rest.mu.Lock()
		jobs := env.rest.jobs
		env.rest.mu.Unlock()
		if jobs > 2 { // one dry run each for Discover and Read, nothing else
			t.Errorf("%q: %d jobs inserted", sql, jobs)
		}
	}
}
