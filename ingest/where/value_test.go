package where

import (
	"errors"
	"testing"

	"github.com/valyala/fastjson"
)

func TestParseValue(t *testing.T) {
	row := JSON{fastjson.MustParse(testRow)}
	cases := []struct{ src, want, canon string }{
		{`properties["plan"]`, `"pro"`, `properties["plan"]`},
		{` user['n'] `, `3`, `user["n"]`},
		{`PROPERTIES["tags"]`, `["a","b",1]`, `properties["tags"]`},
	}
	for _, c := range cases {
		v, err := ParseValue(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got := v.Eval(row); got == nil || got.String() != c.want {
			t.Errorf("%s = %v, want %s", c.src, got, c.want)
		}
		if v.String() != c.canon {
			t.Errorf("%s: String() = %s, want %s", c.src, v.String(), c.canon)
		}
	}
	v, _ := ParseValue(`properties["missing"]`)
	if v.Eval(row) != nil || v.Key() != "missing" {
		t.Error("missing property evaluated to a value")
	}
	if v, err := ParseValue("  "); v != nil || err != nil {
		t.Errorf("blank: %v %v", v, err)
	}
}

func TestParseValueErrors(t *testing.T) {
	cases := []struct {
		src    string
		offset int
	}{
		{`"plan"`, 0},
		{`properties["plan"] == 1`, 19},
		{`properties[plan]`, 11},
		{`properties["plan"`, 17},
	}
	for _, c := range cases {
		_, err := ParseValue(c.src)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrBadWhere) {
			t.Errorf("%s: want *SyntaxError, got %v", c.src, err)
			continue
		}
		if se.Offset != c.offset {
			t.Errorf("%s: offset %d, want %d (%v)", c.src, se.Offset, c.offset, err)
		}
	}
}
