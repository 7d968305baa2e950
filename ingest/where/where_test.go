package where

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fastjson"
)

const testRow = `{"plan":"pro","n":3,"f":2.5,"neg":-1,"ok":true,"off":false,"nul":null,
	"city":"Köln","tags":["a","b",1],"pair":["a",1],"obj":{"x":1},"empty":"","q":"say \"hi\"",
	"id":"acct-10","big":12345678901234567890}`

func TestMatch(t *testing.T) {
	row := JSON{fastjson.MustParse(testRow)}
	cases := []struct {
		expr string
		want bool
	}{
		// equality and types
		{`properties["plan"] == "pro"`, true},
		{`properties["plan"] != "pro"`, false},
		{`properties["plan"] == 'pro'`, true},
		{`"pro" == properties["plan"]`, true},
		{`properties["n"] == 3`, true},
		{`properties["n"] == 3.0`, true},
		{`properties["n"] == 3e0`, true},
		{`properties["n"] == "3"`, false}, // different types are never equal
		{`properties["n"] != "3"`, true},
		{`properties["ok"] == true`, true},
		{`properties["ok"] == TRUE`, true},
		{`properties["off"] == false`, true},
		{`properties["ok"] == 1`, false},
		{`properties["nul"] == null`, true},
		{`properties["missing"] == null`, false},
		{`properties["city"] == "K\u00f6ln"`, true},
		{`properties["q"] == "say \"hi\""`, true},
		{`properties["q"] == 'say "hi"'`, true},
		{`properties["empty"] == ""`, true},
		{`properties["pair"] == ["a", 1]`, true},
		{`properties["pair"] == ["a"]`, false},
		{`properties["obj"] == properties["obj"]`, false}, // objects are never equal
		{`properties["plan"] == properties["plan"]`, true},
		{`properties["big"] == 12345678901234567890`, true},
		// missing properties
		{`properties["missing"] == "x"`, false},
		{`properties["missing"] != "x"`, true},
		{`properties["missing"] < 1`, false},
		{`properties["missing"] >= 1`, false},
		// orderings
		{`properties["n"] > 2`, true},
		{`properties["n"] >= 3`, true},
		{`properties["n"] < 3`, false},
		{`properties["n"] <= 3`, true},
		{`properties["f"] < properties["n"]`, true},
		{`properties["neg"] < 0`, true},
		{`properties["n"] > "2"`, false}, // number vs string: unordered
		{`properties["plan"] > "free"`, true},
		{`properties["plan"] < "q"`, true},
		{`properties["plan"] >= "pro"`, true},
		{`properties["ok"] > false`, false},   // booleans are unordered
		{`properties["id"] < "acct-2"`, true}, // strings compare bytewise, not numerically
		// in
		{`"a" in properties["tags"]`, true},
		{`1 in properties["tags"]`, true},
		{`"c" in properties["tags"]`, false},
		{`"1" in properties["tags"]`, false},
		{`properties["plan"] in ["free", "pro"]`, true},
		{`properties["plan"] in ["free"]`, false},
		{`properties["plan"] in []`, false},
		{`properties["n"] in [1, 2, 3]`, true},
		{`properties["n"] in ["3"]`, false},
		{`properties["plan"] in ["a","b","c","d","e","f","g","h","pro"]`, true}, // hashed
		{`properties["n"] in [1,2,4,5,6,7,8,9,3.0]`, true},
		{`properties["n"] in ["a","b","c","d","e","f","g","h","3"]`, false},
		{`properties["ok"] in [1,2,3,4,5,6,7,8,true]`, true},
		{`properties["nul"] in [1,2,3,4,5,6,7,8,null]`, true},
		{`properties["missing"] in [1,2,3,4,5,6,7,8,null]`, false},
		{`"ro" in properties["plan"]`, true}, // substring
		{`"x" in properties["plan"]`, false},
		{`properties["plan"] in "a pro plan"`, true},
		{`3 in properties["plan"]`, false},
		{`"a" in properties["missing"]`, false},
		{`properties["missing"] in ["a"]`, false},
		{`"x" in properties["obj"]`, false},
		// defined
		{`defined(properties["plan"])`, true},
		{`defined(properties["empty"])`, true},
		{`defined(properties["nul"])`, false},
		{`defined(properties["missing"])`, false},
		{`not defined(properties["missing"])`, true},
		{`DEFINED(user["plan"])`, true},
		// user[] alias
		{`user["plan"] == "pro"`, true},
		// logic and precedence
		{`properties["plan"] == "pro" and properties["n"] == 4`, false},
		{`properties["plan"] == "pro" AND properties["n"] == 3`, true},
		{`properties["plan"] == "free" or properties["n"] == 3`, true},
		{`properties["plan"] == "free" or properties["n"] == 3 and properties["ok"] == false`, false},
		{`(properties["plan"] == "free" or properties["n"] == 3) and properties["ok"] == true`, true},
		{`not properties["plan"] == "free"`, true},
		{`not not properties["plan"] == "free"`, false},
		{`not (properties["plan"] == "pro" and properties["n"] == 3)`, false},
		{`properties["plan"] == "free" or properties["plan"] == "team" or properties["n"] > 1`, true},
		{"properties['plan']\n==\t\"pro\"", true},
		{`properties["n"]==3and properties["ok"]==true`, true},
	}
	for _, tc := range cases {
		e, err := Parse(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if got := e.Match(row); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
		// The canonical form means the same thing.
		if again, err := Parse(e.String()); err != nil || again.Match(row) != tc.want {
			t.Errorf("%s: String() = %s does not round-trip: %v", tc.expr, e.String(), err)
		}
	}
}

func TestEmptyMatchesAll(t *testing.T) {
	for _, src := range []string{"", "  \t\n"} {
		e, err := Parse(src)
		if e != nil || err != nil {
			t.Fatalf("%q: %v %v", src, e, err)
		}
		if !e.Match(JSON{}) || e.String() != "" || e.Keys() != nil {
			t.Fatal("a nil Expr must match everything")
		}
	}
}

func TestJSONRowNonObject(t *testing.T) {
	e, _ := Parse(`properties["0"] == 1`)
	for _, v := range []*fastjson.Value{nil, fastjson.MustParse(`[1]`), fastjson.MustParse(`1`)} {
		if e.Match(JSON{v}) {
			t.Errorf("%v matched", v)
		}
	}
}

func TestString(t *testing.T) {
	cases := []struct{ in, want string }{
		{`properties['a']=='b'`, `properties["a"] == "b"`},
		{`USER["a"] != 1.5e3 AND Properties["b"] In [1,'x' , TRUE, null]`, `user["a"] != 1.5e3 and properties["b"] in [1,"x",true,null]`},
		{`not (properties["a"] == 1 or properties["b"] == 2) and defined(properties["c"])`,
			`not (properties["a"] == 1 or properties["b"] == 2) and defined(properties["c"])`},
		{`properties["a"] == 1 or (properties["b"] == 2 or properties["c"] == 3)`,
			`properties["a"] == 1 or (properties["b"] == 2 or properties["c"] == 3)`},
		{`((properties["a"] < 1))`, `properties["a"] < 1`},
		{`properties["tab\tkey"] == "\u2028\/\ud83d\ude00"`, `properties["tab\tkey"] == "\u2028/😀"`},
		{`properties["x"] == "\ud800"`, `properties["x"] == "` + "\uFFFD" + `"`},
	}
	for _, tc := range cases {
		e, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := e.String(); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestKeys(t *testing.T) {
	e, err := Parse(`properties["a"] == 1 or user["b"] in properties["a"] or defined(properties["c"])`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.Keys(), ","); got != "a,b,c" {
		t.Fatalf("Keys = %s", got)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		expr string
		pos  int
		msg  string
	}{
		{`properties["a"]`, 15, `expected a comparison operator (==, !=, <, >, <=, >=, in) but found end of expression`},
		{`properties["a"] = "b"`, 16, `unexpected "=" (use "==" to compare)`},
		{`!properties["a"]`, 0, `unexpected "!" (use "not" or "!=")`},
		{`properties[a] == "b"`, 11, `expected a quoted property name but found "a"`},
		{`properties("a") == "b"`, 10, `expected '[' but found "("`},
		{`properties["a" == "b"`, 15, `expected ']' but found "=="`},
		{`"a" == "b"`, 0, `a comparison needs a property (properties["name"]) on one side`},
		{`1 in [1, 2]`, 0, `a comparison needs a property`},
		{`properties["a"] == "b" and`, 26, `expected a condition (a comparison, defined(...), not or '(') but found end of expression`},
		{`(properties["a"] == "b"`, 23, `expected ')' but found end of expression`},
		{`defined(properties["a"] and properties["b"] == 1)`, 24, `expected ')' but found "and"`},
		{`defined("a")`, 8, `defined() takes a property`},
		{`properties["a"] == "b`, 19, `unterminated string`},
		{`properties["a"] == "b" ;`, 23, `unexpected character ';'`},
		{`properties["a"] == "b" properties["c"] == 1`, 23, `expected 'and', 'or' or end of expression but found "properties"`},
		{`properties["a"] == "b")`, 22, `expected 'and', 'or' or end of expression but found ")"`},
		{`properties["a"] == == 1`, 19, `expected a property or a literal but found "=="`},
		{`properties["a"] == 01`, 20, `expected 'and', 'or' or end of expression but found "1"`},
		{`properties["a"] == .5`, 19, `unexpected character '.'`},
		{`properties["a"] == -x`, 19, `unexpected '-'`},
		{`properties["a"] == 1e999`, 19, `number 1e999 out of range`},
		{`properties["a"] == "\q"`, 20, `invalid escape "\\q"`},
		{`properties["a"] == "\u12"`, 20, `invalid escape`},
		{"properties[\"a\"] == \"\xff\"", 20, `invalid UTF-8 in string`},
		{`properties["a"] == "é" or ü`, 27, `unexpected character 'ü'`},
		{`properties["a"] in [1, 2`, 24, `expected ',' or ']' but found end of expression`},
		{`properties["a"] in [1,]`, 22, `expected a literal in the list but found "]"`},
		{`properties["a"] in [properties["b"]]`, 20, `expected a literal in the list but found "properties"`},
		{`properties["a"] < [1]`, 16, `< cannot compare lists; use ==, != or in`},
		{`properties["a"] == b`, 19, `expected a property or a literal but found "b"`},
		{`and`, 0, `expected a condition`},
		{`properties["a"] == 1 or or`, 24, `expected a condition`},
		{strings.Repeat("(", 100) + `properties["a"] == 1` + strings.Repeat(")", 100), 64, `nested more than 64 levels deep`},
		{strings.Repeat("not ", 70) + `properties["a"] == 1`, 256, `nested more than 64 levels deep`},
	}
	for _, tc := range cases {
		_, err := Parse(tc.expr)
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrBadWhere) {
			t.Errorf("%s: err = %v, want a *SyntaxError matching ErrBadWhere", tc.expr, err)
			continue
		}
		if se.Offset != tc.pos || !strings.Contains(se.Msg, tc.msg) {
			t.Errorf("%s:\n got %v\nwant position %d: %s", tc.expr, err, tc.pos, tc.msg)
		}
		if want := "where: position "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: message %q", tc.expr, err)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	row := JSON{fastjson.MustParse(testRow)}
	e, err := Parse(`(properties["plan"] in ["a","b","c","d","e","f","g","h","pro"] or "a" in properties["tags"])
		and properties["n"] >= 3 and not properties["city"] == "Berlin" and defined(user["ok"])`)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { e.Match(row) }); n != 0 {
		t.Fatalf("Match allocates %.0f times per row", n)
	}
}

// An Expr is shared by concurrent requests; run with -race to check that
// evaluation never writes to the compiled literals.
func TestConcurrentMatch(t *testing.T) {
	e, err := Parse(`properties["q"] == "say \"hi\"" and properties["plan"] in ["x\n", "pro"]`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p fastjson.Parser
			for range 200 {
				v, _ := p.Parse(testRow)
				if !e.Match(JSON{v}) {
					t.Error("no match")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkMatch(b *testing.B) {
	row := JSON{fastjson.MustParse(testRow)}
	e, _ := Parse(`properties["plan"] == "pro" and properties["n"] > 2 and "b" in properties["tags"]`)
	for b.Loop() {
		e.Match(row)
	}
}
