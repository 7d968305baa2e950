package export

import (
	"errors"
	"testing"

	"github.com/valyala/fastjson"
)

func TestWhere(t *testing.T) {
	props := fastjson.MustParse(`{"plan":"pro","n":3,"ok":true,"city":"Köln"}`)
	row := &Row{Name: "Buy", DistinctID: "u1", InsertID: "i1", TimeMs: 1_700_000_000_500, Props: props}
	cases := []struct {
		expr string
		want bool
	}{
		{`properties["plan"] == "pro"`, true},
		{`properties["plan"] != "pro"`, false},
		{`properties["plan"] == 'pro'`, true},
		{`"pro" == properties["plan"]`, true},
		{`properties["missing"] == "x"`, false},
		{`properties["missing"] != "x"`, true},
		{`properties["n"] == 3`, true},
		{`properties["n"] == "3"`, false},
		{`properties["ok"] == true`, true},
		{`properties["city"] == "Köln"`, true},
		{`properties["distinct_id"] == "u1"`, true},
		{`properties["$insert_id"] == "i1"`, true},
		{`properties["time"] == 1700000000`, true},
		{`properties["plan"] == "pro" and properties["n"] == 4`, false},
		{`properties["plan"] == "pro" AND properties["n"] == 3`, true},
		{`properties["plan"] == "free" or properties["n"] == 3`, true},
		{`properties["plan"] == "free" or properties["n"] == 3 and properties["ok"] == false`, false},
		{`(properties["plan"] == "free" or properties["n"] == 3) and properties["ok"] == true`, true},
		{`not properties["plan"] == "free"`, true},
		{`properties["plan"] == "p\"ro"`, false},
	}
	for _, tc := range cases {
		f, err := ParseWhere(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if got := f.Match(row); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestWhereErrors(t *testing.T) {
	for _, expr := range []string{
		`properties["a"]`, `properties["a"] = "b"`, `properties[a] == "b"`, `"a" == "b"`,
		`properties["a"] == "b" and`, `(properties["a"] == "b"`, `properties["a"] == "b`, `properties["a"] == "b" ;`,
	} {
		if _, err := ParseWhere(expr); !errors.Is(err, ErrBadWhere) {
			t.Errorf("%s: err = %v, want ErrBadWhere", expr, err)
		}
	}
	if f, err := ParseWhere("  "); f != nil || err != nil {
		t.Fatal("empty where must match everything")
	}
}
