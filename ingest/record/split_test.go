package record

import (
	"errors"
	"strings"
	"testing"
)

func splitStrings(t *testing.T, body string, ndjson bool, lim Limits) ([]string, error) {
	t.Helper()
	recs, err := Split([]byte(body), ndjson, lim, nil)
	var out []string
	for _, r := range recs {
		out = append(out, string(r))
	}
	return out, err
}

func TestSplit(t *testing.T) {
	tricky := `{"event":"a]},[{\"","properties":{"s":"x\\","t":"\\\"]","u":"{[}]"}}`
	tests := []struct {
		name   string
		body   string
		ndjson bool
		want   []string
	}{
		{"array", `[{"a":1},{"b":2}]`, false, []string{`{"a":1}`, `{"b":2}`}},
		{"array with whitespace", " \n[ {\"a\":1} ,\r\n\t{\"b\":[2,{}]} ]\n ", false, []string{`{"a":1}`, `{"b":[2,{}]}`}},
		{"brackets and escapes in strings", `[` + tricky + `,` + tricky + `]`, false, []string{tricky, tricky}},
		{"empty array", ` [ ] `, false, nil},
		{"empty body", "  \n ", false, nil},
		{"array of scalars framed for Decode to refuse", `[1, "x", true, null]`, false, []string{"1", `"x"`, "true", "null"}},
		{"single object", `{"event":"e","properties":{}}`, false, []string{`{"event":"e","properties":{}}`}},
		{"pretty single object", "{\n  \"event\": \"e\",\n  \"properties\": {\n    \"a\": [1, 2]\n  }\n}\n", false,
			[]string{"{\n  \"event\": \"e\",\n  \"properties\": {\n    \"a\": [1, 2]\n  }\n}"}},
		{"ndjson detected", "{\"a\":1}\n\n{\"b\":\"}\\n\"}\r\n\r\n{\"c\":3}", false, []string{`{"a":1}`, `{"b":"}\n"}`, `{"c":3}`}},
		{"ndjson forced", "{\"a\":1}\r\n  \n{\"b\":2}  \n\n", true, []string{`{"a":1}`, `{"b":2}`}},
		{"ndjson forced keeps broken lines for Decode", "{\"a\":1\n{\"b\":2}\nxyz", true, []string{`{"a":1`, `{"b":2}`, "xyz"}},
		{"ndjson forced: an array is one record", `[{"a":1}]`, true, []string{`[{"a":1}]`}},
		{"BOM", "\xef\xbb\xbf[{\"a\":1}]", false, []string{`{"a":1}`}},
		{"mismatched brackets framed by depth", `[{"a":[1}]]`, false, []string{`{"a":[1}]`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitStrings(t, tc.body, tc.ndjson, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") || len(got) != len(tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestSplitMalformed(t *testing.T) {
	for _, body := range []string{
		`[{"a":1}`, `[{"a":1},`, `[{"a":1},]`, `[{"a":1} {"b":2}]`, `[{"a":1}] x`, `[{"a":"1}]`,
		`[,{"a":1}]`, `[{"a":1}]]`, `[`, `{"a":1`, `{"a":1} x`, `{"a":1},{"b":2}`, `x`, `"str"`,
		`{"a":"unterminated`, `[{"a":1}x]`, `}`,
	} {
		if _, err := Split([]byte(body), false, DefaultLimits(), nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: got %v, want ErrMalformed", body, err)
		}
	}
}

func TestSplitRecordLimit(t *testing.T) {
	for _, ndjson := range []bool{false, true} {
		build := func(n int) string {
			recs := strings.TrimSuffix(strings.Repeat("{\"a\":1}\n,", n), ",")
			if ndjson {
				return strings.ReplaceAll(recs, ",", "")
			}
			return "[" + recs + "]"
		}
		got, err := Split([]byte(build(2000)), ndjson, DefaultLimits(), nil)
		if err != nil || len(got) != 2000 {
			t.Fatalf("ndjson=%v 2000 records: %d %v", ndjson, len(got), err)
		}
		// 2001 records fail, even when the body is otherwise truncated: the
		// scan stops as soon as the limit is passed.
		body := build(2001)
		for _, b := range []string{body, body[:len(body)-3]} {
			if _, err := Split([]byte(b), ndjson, DefaultLimits(), nil); !errors.Is(err, ErrTooManyRecords) {
				t.Errorf("ndjson=%v 2001 records: %v", ndjson, err)
			}
		}
	}
	// The limit counts only this body's records, not what dst already holds.
	dst := make([][]byte, 5)
	got, err := Split([]byte(`[{},{}]`), false, Limits{MaxRecords: 2}, dst)
	if err != nil || len(got) != 7 {
		t.Errorf("appending: %d %v", len(got), err)
	}
}

func TestSplitEventSize(t *testing.T) {
	lim := Limits{MaxRecords: 10, MaxEventBytes: 20}
	exact := `{"a":"` + strings.Repeat("x", 12) + `"}` // 20 bytes
	if len(exact) != 20 {
		t.Fatal(len(exact))
	}
	for _, mode := range []struct {
		ndjson bool
		wrap   func(string) string
	}{
		{false, func(s string) string { return "[" + s + "]" }},
		{false, func(s string) string { return s }},
		{true, func(s string) string { return s + "\r\n" }},
	} {
		if _, err := Split([]byte(mode.wrap(exact)), mode.ndjson, lim, nil); err != nil {
			t.Errorf("20 bytes: %v", err)
		}
		over := strings.Replace(exact, "x", "xx", 1)
		if _, err := Split([]byte(mode.wrap(over)), mode.ndjson, lim, nil); !errors.Is(err, ErrEventTooLarge) {
			t.Errorf("21 bytes: %v", err)
		}
	}
	if l := (Limits{}).orDefault(); l != DefaultLimits() || l.MaxRecords != 2000 || l.MaxEventBytes != 1<<20 {
		t.Errorf("defaults %+v", l)
	}
}

func TestSplitErrorDetail(t *testing.T) {
	_, err := Split([]byte(`[{"a":1} x]`), false, DefaultLimits(), nil)
	if err == nil || !strings.Contains(err.Error(), "byte 9") {
		t.Errorf("error should name the byte offset: %v", err)
	}
}
