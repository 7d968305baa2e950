package where

import (
	"errors"
	"slices"
	"testing"

	"github.com/valyala/fastjson"
)

// FuzzParse checks that Parse never panics, that every error is a
// positioned *SyntaxError inside the expression, and that String is a
// canonical form: it parses back to an expression that prints the same,
// reads the same keys and matches the same rows.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`properties["plan"] == "pro"`,
		`not (user['n'] >= 3 or "a" in properties["tags"]) and defined(properties["x"])`,
		`properties["a"] in [1, -2.5e3, "x\u00e9", true, null]`,
		`properties["a"] in ["a","b","c","d","e","f","g","h","i"]`,
		`properties["a"] == "\ud83d\ude00\/\"'\\" or properties["b"] != properties["c"]`,
		`defined(properties["a"] and`, `properties["a"] = 1`, `((((`, `"x" == "y"`,
	} {
		f.Add(s)
	}
	rows := []Row{JSON{}, JSON{fastjson.MustParse(testRow)},
		JSON{fastjson.MustParse(`{"a":1,"b":"x","c":"x","x":null,"tags":["a"],"n":3,"plan":"pro"}`)}}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrBadWhere) {
				t.Fatalf("%q: error %v is not a *SyntaxError", src, err)
			}
			if se.Offset < 0 || se.Offset > len(src) {
				t.Fatalf("%q: offset %d outside the expression", src, se.Offset)
			}
			return
		}
		if e == nil {
			return
		}
		s := e.String()
		e2, err := Parse(s)
		if err != nil {
			t.Fatalf("%q: String() = %q does not parse: %v", src, s, err)
		}
		if s2 := e2.String(); s2 != s {
			t.Fatalf("%q: String() is not canonical: %q then %q", src, s, s2)
		}
		if !slices.Equal(e.Keys(), e2.Keys()) {
			t.Fatalf("%q: keys %q then %q", src, e.Keys(), e2.Keys())
		}
		for _, r := range rows {
			if e.Match(r) != e2.Match(r) {
				t.Fatalf("%q and %q disagree on %v", src, s, r)
			}
		}
	})
}
