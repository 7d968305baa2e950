package mapping

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// flatCases pin the flattener's output for the JSON-properties column
// (no prefix). The expectations are what the fastjson implementation
// wrote, quirks included (see jsonflat.go); each case is also checked
// against the oracle.
var flatCases = []struct {
	name, in, want string
	bad            bool
}{
	{"empty object", `{}`, ``, false},
	{"one", `{"a":1}`, `"a":1`, false},
	{"nested", `{"a":{"b":{"c":"x"}}}`, `"a.b.c":"x"`, false},
	{"empty nested object kept", `{"a":{},"b":{ }}`, `"a":{},"b":{}`, false},
	{"empty array", `{"a":[]}`, `"a":[]`, false},
	{"array copied compact", `{"a":[ 1 , {"b" : "c\"d"} , [ ] , null, true,false ]}`, `"a":[1,{"b":"c\"d"},[],null,true,false]`, false},
	{"array keeps escapes", `{"a":["\u00e9","x\"y","\/"]}`, `"a":["\u00e9","x\"y","\/"]`, false},
	{"object in array keeps raw keys", `{"a":[{"k\u0041":{"x":1},"e":{}}]}`, `"a":[{"k\u0041":{"x":1},"e":{}}]`, false},
	{"null left out", `{"a":null,"b":2,"c":{"d":null}}`, `"b":2`, false},
	{"duplicate key: first wins", `{"a":1,"a":2}`, `"a":1`, false},
	{"dotted clash: first wins", `{"a.b":1,"a":{"b":2,"c":3}}`, `"a.b":1,"a.c":3`, false},
	{"table column wins", `{"qty":5,"price":{"x":1},"n":1,"shipping":{"city":"X"}}`, `"price.x":1,"n":1`, false},
	{"mapper fields win", `{"time":1,"distinct_id":"x","$insert_id":"y","$source":"z"}`, ``, false},
	{"empty key", `{"":{"a":1},"b":{"":2}}`, `"a":1,"b.":2`, false},
	{"whitespace", " \t\r\n{ \"a\" :\n1 , \"b\":{ \"c\" : [ 1 ,2 ] } }\n", `"a":1,"b.c":[1,2]`, false},
	{"bools", `{"t":true,"f":false}`, `"t":true,"f":false`, false},

	{"quote escape requoted", `{"s":"a\"b"}`, `"s":"a\"b"`, false},
	{"solidus unescaped", `{"s":"\/"}`, `"s":"/"`, false},
	{"control escapes requoted", `{"s":"\b\f\n\r\t"}`, `"s":"\b\f\n\r\t"`, false},
	{"unicode escape", `{"s":"\u00e9\u65E5"}`, `"s":"é日"`, false},
	{"NUL escape", `{"s":"\u0000"}`, `"s":"\u0000"`, false},
	{"U+2028 written raw", `{"s":"\u2028"}`, "\"s\":\"\u2028\"", false},
	{"surrogate pair", `{"s":"\ud83d\ude00"}`, `"s":"😀"`, false},
	{"lone high surrogate kept", `{"s":"\ud83d!"}`, `"s":"\\ud83d!"`, false},
	{"high surrogate and non-surrogate", `{"s":"\ud83d\u0041"}`, `"s":"�"`, false},
	{"lone low surrogate at end", `{"s":"\ude00"}`, `"s":"\\ude00"`, false},
	{"short unicode escape", `{"s":"\u12"}`, `"s":"\\u12"`, false},
	{"bad hex", `{"s":"\uZZZZ"}`, `"s":"\\uZZZZ"`, false},
	{"unknown escape", `{"s":"\x"}`, `"s":"\\x"`, false},
	{"raw control byte", "{\"s\":\"a\x01b\"}", `"s":"a\u0001b"`, false},
	{"raw invalid UTF-8 kept", "{\"s\":\"\xff\"}", "\"s\":\"\xff\"", false},
	{"invalid UTF-8 with an escape", "{\"s\":\"\\t\xff\"}", `"s":"\t\ufffd"`, false},
	{"key escapes", `{"k\"q":1,"\u0041":2,"a\tb":3,"\/":4}`, `"k\"q":1,"A":2,"a\tb":3,"/":4`, false},
	{"key invalid UTF-8", "{\"\xff\":1}", `"\ufffd":1`, false},
	{"key U+2028", "{\"\u2028\":1}", `"\u2028":1`, false},

	{"numbers as written", `{"n":[0,-0,1.5e10,1E+2,-2.5e-3],"b":12345678901234567890123}`, `"n":[0,-0,1.5e10,1E+2,-2.5e-3],"b":12345678901234567890123`, false},
	{"leading zero is not JSON", `{"c":01}`, ``, true},
	{"raw control byte in an array", "{\"a\":[\"x\x01\"]}", ``, true},
	{"unknown escape in an array", `{"a":["\x"]}`, ``, true},
	{"NaN under a taken name is skipped", `{"a":1,"a":NaN,"b":[1]}`, `"a":1,"b":[1]`, false},
	{"loose numbers", `{"a":1.2.3,"b":+1,"c":.,"d":e5,"e":--1}`, ``, true},
	{"NaN and Inf", `{"a":NaN,"b":nan,"c":-Inf,"d":[inf,+INF,-nan]}`, ``, true},

	{"not json", `not json`, ``, true},
	{"array", `[1,2]`, ``, true},
	{"string", `"str"`, ``, true},
	{"number", `5`, ``, true},
	{"empty", ``, ``, true},
	{"blank", " \n", ``, true},
	{"trailing comma", `{"a":1,}`, ``, true},
	{"unterminated", `{"a":1`, ``, true},
	{"trailing garbage", `{"a":1}x`, ``, true},
	{"two objects", `{"a":1}{}`, ``, true},
	{"bad literal", `{"a":tru}`, ``, true},
	{"bad null", `{"a":nul}`, ``, true},
	{"missing colon", `{"a" 1}`, ``, true},
	{"bare key", `{a:1}`, ``, true},
	{"unterminated string", `{"a":"x}`, ``, true},
	{"array trailing comma", `{"a":[1,]}`, ``, true},
	{"lone minus", `{"a":-}`, ``, true},
	{"bad Infinity", `{"a":Infinity}`, ``, true},
	{"missing value", `{"a":}`, ``, true},
	{"error after output", `{"a":1,"b":{"c":2},"d":[1,2}`, ``, true},
	{"form feed is not space", "{\f}", ``, true},
}

func flatOnly(t *testing.T, prefix, doc string) (string, bool) {
	t.Helper()
	m := benchMapper(t)
	m.resetDyn()
	m.comma = false
	out := m.appendJSONText(nil, doc, prefix)
	return string(out), m.badJSON
}

func TestFlattenJSONCases(t *testing.T) {
	for _, tc := range flatCases {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := flatOnly(t, "", tc.in)
			if got != tc.want || bad != tc.bad {
				t.Errorf("%s\n got %s (bad %v)\nwant %s (bad %v)", tc.in, got, bad, tc.want, tc.bad)
			}
			sameAsOracle(t, "", false, tc.in)
			sameAsOracle(t, "col", true, tc.in)
		})
	}
}

// A JSON property column (not the JSON-properties column) is flattened
// under its name, and keeps text that is not an object as a string.
func TestFlattenJSONPrefixed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"b":{"c":2}}`, `"col.a":1,"col.b.c":2`},
		{`{}`, ``},
		{`{"":1}`, `"col.":1`},
		{`[1]`, `"col":"[1]"`},
		{`not json`, `"col":"not json"`},
		{`{"a":1,"b":[}`, `"col":"{\"a\":1,\"b\":[}"`},
		{"\xff", `"col":"\ufffd"`},
	} {
		got, bad := flatOnly(t, "col", tc.in)
		if got != tc.want || bad {
			t.Errorf("%s: got %s (bad %v), want %s", tc.in, got, bad, tc.want)
		}
		sameAsOracle(t, "col", false, tc.in)
	}
}

// claim must agree with a plain set: a name is free unless a column or
// the mapper owns it, or this row took it already (linear up to 32 dynamic
// names, hashed beyond).
func TestClaimMatchesSet(t *testing.T) {
	m := benchMapper(t)
	r := rand.New(rand.NewPCG(5, 6))
	pool := []string{"", "a", "b", "ab", "ba", "qty", "price", "time", "$source", "shipping.city", "shipping.zip", "shipping",
		"tags", "coupon", "plan", "page.path", "page.ref", "n", "x.y", "\xff", "Zürich"}
	for row := 0; row < 2000; row++ {
		m.resetDyn()
		taken := map[string]bool{}
		for k, n := 0, r.IntN(80); k < n; k++ {
			name := pool[r.IntN(len(pool))]
			if r.IntN(3) == 0 {
				name += strconv.Itoa(r.IntN(60))
			}
			_, fixed := m.names[name]
			want := !fixed && !taken[name]
			if got := m.claim([]byte(name)); got != want {
				t.Fatalf("row %d claim %d %q = %v, want %v", row, k, name, got, want)
			}
			if want {
				taken[name] = true
			}
		}
	}
}
