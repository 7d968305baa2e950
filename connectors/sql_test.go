package connectors

import (
	"reflect"
	"testing"
	"time"
)

func TestSelectSQL(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		req  ReadRequest
		sql  string
		args []any
	}{
		{"all", ReadRequest{}, `SELECT * FROM t`, nil},
		{"columns order limit", ReadRequest{Columns: []string{"a", `we"ird`}, OrderBy: []string{"a"}, Limit: 20},
			`SELECT "a", "we""ird" FROM t ORDER BY "a" LIMIT 20`, nil},
		{"watermark with tie-break", ReadRequest{
			After:   &Watermark{Columns: []string{"loaded_at", "id"}, Values: []any{ts, int64(7)}},
			OrderBy: []string{"loaded_at", "id"}},
			`SELECT * FROM t WHERE ("loaded_at" > $1) OR ("loaded_at" = $2 AND "id" > $3) ORDER BY "loaded_at", "id"`,
			[]any{ts, ts, int64(7)}},
		{"inclusive watermark without a key", ReadRequest{
			After:   &Watermark{Columns: []string{"loaded_at"}, Values: []any{ts}, Inclusive: true},
			OrderBy: []string{"loaded_at"}},
			`SELECT * FROM t WHERE ("loaded_at" >= $1) ORDER BY "loaded_at"`,
			[]any{ts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sql, args := SelectSQL(Dialect{Placeholder: DollarPlaceholder}, "t", tt.req)
			if sql != tt.sql {
				t.Errorf("sql\n got %s\nwant %s", sql, tt.sql)
			}
			if !reflect.DeepEqual(args, tt.args) {
				t.Errorf("args got %v want %v", args, tt.args)
			}
		})
	}
}

func TestQuoteTable(t *testing.T) {
	if got := QuoteTable("main.app_events"); got != `"main"."app_events"` {
		t.Fatal(got)
	}
}

func TestRegistryValidate(t *testing.T) {
	r := NewRegistry(Kind{Name: "duckdb", Fields: []Field{{Name: "path", Required: true}}})
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, "source.kind: is required (one of duckdb)"},
		{Config{Kind: "oracle"}, `source.kind: unknown kind "oracle" (one of duckdb)`},
		{Config{Kind: "duckdb"}, "source.path: is required for kind duckdb"},
		{Config{Kind: "duckdb", Fields: map[string]string{"path": "x", "host": "y"}}, "source.host: unknown field for kind duckdb"},
	} {
		err := r.Validate(tc.c)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%+v) = %v, want %s", tc.c, err, tc.want)
		}
	}
	if err := r.Validate(Config{Kind: "duckdb", Fields: map[string]string{"path": "x"}}); err != nil {
		t.Fatal(err)
	}
}
