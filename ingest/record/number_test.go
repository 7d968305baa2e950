package record

import (
	"strings"
	"testing"
)

// Numbers beyond what readers of the stored events can hold fail their
// record, naming the property, on the general and the one-pass path
// alike; numbers in range are stored as sent.
func TestNumberRange(t *testing.T) {
	canonical := func(extra string) string {
		return `{"event":"e","properties":{"time":1748736000000,"distinct_id":"u1","$insert_id":"abcdef0123456789",` + extra + `}}`
	}
	cases := []struct {
		name, value string
		field       string // "" when accepted
	}{
		{"int64 max", "9223372036854775807", ""},
		{"int64 min", "-9223372036854775808", ""},
		{"int64 max + 1", "9223372036854775808", "properties.n"},
		{"int64 min - 1", "-9223372036854775809", "properties.n"},
		{"2^64", "18446744073709551616", "properties.n"},
		{"100 digits", "1" + strings.Repeat("0", 99), "properties.n"},
		{"short int", "42", ""},
		{"18 digits", "999999999999999999", ""},
		{"decimal", "12.99", ""},
		{"big decimal, finite", "18446744073709551616.5", ""},
		{"1e400", "1e400", "properties.n"},
		{"-1e400", "-1e400", "properties.n"},
		{"1E+309", "1E+309", "properties.n"},
		{"max float", "1.7976931348623157e308", ""},
		{"just over max float", "1.7976931348623159e308", "properties.n"},
		{"309-digit decimal over max", "2" + strings.Repeat("0", 308) + ".5", "properties.n"},
		{"309-digit decimal under max", "1" + strings.Repeat("0", 308) + ".5", ""},
		{"underflow is zero", "1e-400", ""},
		{"exponent, in range", "1e19", ""},
		{"nested in an object", `{"a":[1,1e400]}`, "properties.n"},
		{"nested in a list", `[1,2,99999999999999999999]`, "properties.n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []struct {
				name string
				opt  Options
				rec  string
			}{
				{"strict", strictOpts(), ev(`"n":` + tc.value)},
				{"lenient", lenientOpts(), ev(`"n":` + tc.value)},
				{"canonical", func() Options { o := strictOpts(); o.Canonical = true; return o }(), canonical(`"n":` + tc.value)},
			} {
				if tc.field == "" {
					e := mustEvent(t, mode.opt, mode.rec)
					if !strings.Contains(string(e.Props), `"n":`+tc.value) {
						t.Fatalf("%s: props %s, want the number as sent", mode.name, e.Props)
					}
					continue
				}
				f := mustFail(t, mode.opt, mode.rec)
				if f.Field != tc.field || !strings.Contains(f.Message, "number out of range") || !strings.HasPrefix(f.Message, "'"+tc.field+"' is invalid") {
					t.Fatalf("%s: failure %+v, want field %s and the range message", mode.name, f, tc.field)
				}
			}
			if got := CleanNumber([]byte(tc.value)); !strings.ContainsAny(tc.value, "[{") && got != (tc.field == "") {
				t.Fatalf("CleanNumber(%s) = %v", tc.value, got)
			}
		})
	}
}

// A $merge record's properties follow the same rule; an id sent as a
// string keeps every digit.
func TestNumberRangeElsewhere(t *testing.T) {
	f := mustFail(t, strictOpts(), `{"event":"$merge","properties":{"$distinct_ids":["a","b"],"token":"tok123","x":1e999}}`)
	if f.Field != "properties.x" {
		t.Fatalf("$merge: %+v", f)
	}
	long := strings.Repeat("9", 40)
	e := mustEvent(t, strictOpts(), ev(`"account":"`+long+`"`))
	if !strings.Contains(string(e.Props), long) {
		t.Fatalf("a long numeric string changed: %s", e.Props)
	}
	// time has its own rule and message.
	if f := mustFail(t, strictOpts(), `{"event":"e","properties":{"time":1e400,"distinct_id":"u1"}}`); f.Field != "properties.time" {
		t.Fatalf("time: %+v", f)
	}
}

func BenchmarkNumber(b *testing.B) {
	toks := [][]byte{[]byte("1920"), []byte("12.99"), []byte("1748736000000"), []byte("-3"), []byte("9223372036854775807"), []byte("1.5e3")}
	for b.Loop() {
		for _, t := range toks {
			if _, big, err := number(t, 0); big || err != nil {
				b.Fatal("in range")
			}
		}
	}
}
