package bigquery

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/connectors"
)

func TestKindFields(t *testing.T) {
	k := Kind()
	if k.Name != "bigquery" {
		t.Fatalf("name %q", k.Name)
	}
	secret := map[string]bool{}
	for _, f := range k.Fields {
		secret[f.Name] = f.Secret
	}
	if !secret["credentials_json"] || secret["credentials_file"] || secret["project"] {
		t.Errorf("secret fields %v: want credentials_json only", secret)
	}
	reg := connectors.NewRegistry(k)
	key := `{"type": "service_account", "project_id": "p"}`
	cases := []struct {
		fields map[string]string
		field  string // offending field, "" when valid
	}{
		{map[string]string{"project": "p", "dataset": "d", "credentials_json": key}, ""},
		{map[string]string{"project": "p", "credentials_file": "/etc/key.json", "location": "EU"}, ""},
		{map[string]string{"project": "p", "credentials_json": "${BQ_KEY}"}, ""},
		{map[string]string{"project": "p", "endpoint": "http://127.0.0.1:9050", "storage_endpoint": "http://127.0.0.1:9060"}, ""},
		{map[string]string{"project": "p", "storage_endpoint": "bigquerystorage.example.internal:443"}, ""},
		{map[string]string{"dataset": "d"}, "source.project"},
		{map[string]string{"project": "p", "credentials_file": "k.json", "credentials_json": key}, "source.credentials_json"},
		{map[string]string{"project": "p", "credentials_json": `{"type": "authorized_user"}`}, "source.credentials_json"},
		{map[string]string{"project": "p", "credentials_json": `not json`}, "source.credentials_json"},
		{map[string]string{"project": "p", "max_streams": "100"}, "source.max_streams"},
		{map[string]string{"project": "p", "endpoint": "127.0.0.1:9050"}, "source.endpoint"},
		{map[string]string{"project": "p", "storage_endpoint": "http://host"}, "source.storage_endpoint"},
		{map[string]string{"project": "p", "host": "h"}, "source.host"},
	}
	for _, c := range cases {
		err := reg.Validate(connectors.Config{Kind: "bigquery", Fields: c.fields})
		var fe *connectors.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%v: %v", c.fields, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%v: error %v, want one on %s", c.fields, err, c.field)
		}
	}
}

func TestPredicateLiterals(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	cases := []struct {
		v    any
		typ  string
		want string
	}{
		{ts, "TIMESTAMP", "TIMESTAMP '2026-03-04 05:06:07.123456+00:00'"},
		{ts, "DATETIME", "DATETIME '2026-03-04 05:06:07.123456'"},
		{ts, "DATE", "DATE '2026-03-04'"},
		{"2026-03-04", "DATE", "DATE '2026-03-04'"},
		{ts, "", "'2026-03-04 05:06:07.123456'"},
		{time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC), "", "'2026-03-04'"},
		{int64(-5), "INT64", "-5"},
		{2.0, "FLOAT64", "2.0"},
		{"12.34", "NUMERIC", "NUMERIC '12.34'"},
		{`it's \ "x"`, "STRING", `'it\'s \\ "x"'`},
		{[]byte{0, 1}, "BYTES", "FROM_BASE64('AAE=')"},
		{"7", "INT64", "CAST('7' AS INT64)"},
	}
	for _, c := range cases {
		got, err := literal(c.v, c.typ)
		if err != nil || got != c.want {
			t.Errorf("literal(%v, %s) = %s, %v; want %s", c.v, c.typ, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		v   any
		typ string
	}{{nil, "INT64"}, {"x", "INT64"}, {"yesterday", "TIMESTAMP"}, {struct{}{}, ""}} {
		if _, err := literal(bad.v, bad.typ); err == nil {
			t.Errorf("literal(%v, %s) accepted", bad.v, bad.typ)
		}
	}
	p, err := predicate(&connectors.Watermark{Columns: []string{"ts", "id"}, Values: []any{ts, int64(9)}},
		map[string]string{"ts": "TIMESTAMP", "id": "INT64"})
	want := "(`ts` > TIMESTAMP '2026-03-04 05:06:07.123456+00:00') OR (`ts` = TIMESTAMP '2026-03-04 05:06:07.123456+00:00' AND `id` > 9)"
	if err != nil || p != want {
		t.Errorf("predicate: %s, %v", p, err)
	}
	if _, err := predicate(&connectors.Watermark{Columns: []string{"id"}, Values: []any{"x"}}, map[string]string{"id": "INT64"}); !errors.Is(err, connectors.ErrBadRequest) {
		t.Errorf("bad watermark: %v", err)
	}
}

func TestANSITableNames(t *testing.T) {
	cases := map[string]string{
		`SELECT id FROM "ds"."series" WHERE id < 10`:                   "SELECT id FROM `ds`.`series` WHERE id < 10",
		`select * from "a""b" join "x"."y" on true`:                    "select * from `a\"b` join `x`.`y` on true",
		`SELECT "from" AS s FROM t WHERE s = "join"`:                   `SELECT "from" AS s FROM t WHERE s = "join"`,
		"SELECT 1 FROM `p.d.t` -- FROM \"x\"\n":                        "SELECT 1 FROM `p.d.t` -- FROM \"x\"\n",
		`SELECT r"FROM \"x\"", '''FROM "y"''' FROM /* FROM "z" */ "w"`: `SELECT r"FROM \"x\"", '''FROM "y"''' FROM /* FROM "z" */ ` + "`w`",
	}
	for in, want := range cases {
		if got := ansiTableNames(in); got != want {
			t.Errorf("ansiTableNames(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}

// A NUMERIC(12,2) column arrives as decimal128(38,9) and leaves at its
// declared scale; columns come in the requested order.
func TestConform(t *testing.T) {
	src := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "amount", Type: numericType, Nullable: true},
		{Name: "nums", Type: arrow.ListOfField(arrow.Field{Name: "l", Type: arrow.PrimitiveTypes.Int64, Nullable: true})},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, src)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	b.Field(1).(*array.Decimal128Builder).Append(decimal128.FromI64(12_340_000_000))
	b.Field(1).AppendNull()
	lb := b.Field(2).(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Int64Builder).Append(5)
	lb.Append(true)
	rec := b.NewRecordBatch()
	defer rec.Release()
	want := []arrow.Field{{Name: "nums", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}}, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	c := &conformer{want: want}
	out, err := c.conform(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if got := out.Column(1).ValueStr(0); got != "12.34" || !out.Column(1).IsNull(1) {
		t.Errorf("amount %s", out.Column(1))
	}
	if !arrow.TypeEqual(out.Schema().Field(0).Type, want[0].Type) || out.Column(0).ValueStr(0) != "[5]" || out.Column(2).ValueStr(1) != "2" {
		t.Errorf("conformed %v", out)
	}
}
