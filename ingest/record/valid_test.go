package record

import (
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func TestPropsReencoding(t *testing.T) {
	tests := []struct{ name, props, want string }{
		{"only reserved keys", `"time":1748736000,"distinct_id":"u","$insert_id":"i1"`, `{}`},
		{"order kept, reserved removed",
			`"b":1,"time":1748736000,"a":"x","distinct_id":"u","$insert_id":"i1","c":true`,
			`{"b":1,"a":"x","c":true}`},
		{"whitespace removed", "\"time\" : 1748736000 ,\n \"distinct_id\":\"u\", \"a\" : [ 1 , { \"b\" : null } ] ",
			`{"a":[1,{"b":null}]}`},
		{"numbers as raw text", `"time":1748736000,"distinct_id":"u","a":1.50,"b":-0,"c":2.5E+3,"d":1234567890123456789,"e":12345678901234567890123.0`,
			`{"a":1.50,"b":-0,"c":2.5E+3,"d":1234567890123456789,"e":12345678901234567890123.0}`},
		{"escapes decoded and re-encoded", `"time":1748736000,"distinct_id":"u","s":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00\u0001"`,
			`{"s":"a\"b\\c/d\n\té😀\u0001"}`},
		{"escaped key", `"time":1748736000,"distinct_id":"u","k\"ey":1`, `{"k\"ey":1}`},
		{"raw non-ASCII kept", `"time":1748736000,"distinct_id":"u","ville":"Zürich","emoji":"🎉"`,
			`{"ville":"Zürich","emoji":"🎉"}`},
		{"$distinct_id and token are ordinary properties", `"time":1748736000,"distinct_id":"u","$distinct_id":"x","token":"t"`,
			`{"$distinct_id":"x","token":"t"}`},
		{"nested reserved names kept", `"time":1748736000,"distinct_id":"u","o":{"time":1,"distinct_id":"z"}`,
			`{"o":{"time":1,"distinct_id":"z"}}`},
		{"empty containers", `"time":1748736000,"distinct_id":"u","o":{},"a":[]`, `{"o":{},"a":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEvent(t, strictOpts(), `{"event":"e","properties":{`+tc.props+`}}`)
			if string(e.Props) != tc.want {
				t.Errorf("props\n got %s\nwant %s", e.Props, tc.want)
			}
		})
	}
}

func TestValidEventFields(t *testing.T) {
	rec := `{"properties":{"time":1748736000,"distinct_id":"user-1","$insert_id":"abc-DEF-123","x":1},"event":"Signed Up"}`
	e := mustEvent(t, strictOpts(), rec)
	want := store.Event{
		Name: "Signed Up", DistinctID: "user-1", TimeMs: nowS * 1000, InsertID: "abc-DEF-123",
		Props: []byte(`{"x":1}`), IngestMs: now.UnixMilli(),
		Key: store.DedupKey(7, "Signed Up", "user-1", nowS*1000, "abc-DEF-123"),
	}
	if e.Name != want.Name || e.DistinctID != want.DistinctID || e.TimeMs != want.TimeMs ||
		e.InsertID != want.InsertID || string(e.Props) != string(want.Props) || e.IngestMs != want.IngestMs || e.Key != want.Key {
		t.Errorf("got  %+v\nwant %+v", e, want)
	}
	// Without $insert_id the event is stored but never deduplicated.
	e = mustEvent(t, strictOpts(), ev(""))
	if e.InsertID != "" || e.Key != (store.Key{}) || e.Dedupable() {
		t.Errorf("event without $insert_id: %+v", e)
	}
	if cap(e.Props) != len(e.Props) {
		t.Errorf("Props must be capped so appends cannot clobber the arena")
	}
}

func TestTime(t *testing.T) {
	tests := []struct {
		raw  string
		want int64
	}{
		{"1748736000", nowS * 1000},             // seconds
		{"1748736000123", nowS*1000 + 123},      // milliseconds
		{"1748736000.1234", nowS*1000 + 123},    // float seconds, rounded
		{"1748736000.9996", nowS*1000 + 1000},   // rounds up
		{"1748736000123.5", nowS*1000 + 124},    // float ms, rounded half away from zero
		{"1.748736e9", nowS * 1000},             // exponent form
		{"31536000", 31_536_000_000},            // exactly 1971-01-01, seconds
		{"31536000000", 31_536_000_000},         // exactly 1971-01-01, ms
		{"9999999999", 0},                       // largest seconds value: far future, fails
		{"1748739600", (nowS + 3600) * 1000},    // exactly now+1h
		{"1748739600000", (nowS + 3600) * 1000}, // exactly now+1h in ms
		{"1748739600.0004", (nowS + 3600) * 1000},
		{"1748739600.0006", 0},            // rounds past now+1h
		{"1000000000", 1_000_000_000_000}, // 2001, seconds
	}
	for _, tc := range tests {
		rec := `{"event":"e","properties":{"time":` + tc.raw + `,"distinct_id":"u"}}`
		b, fails := decode(t, strictOpts(), rec)
		if tc.want == 0 {
			if len(fails) != 1 || fails[0].Field != "properties.time" {
				t.Errorf("time %s: want failure, got %+v", tc.raw, b.Events)
			}
			continue
		}
		if len(fails) > 0 || b.Events[0].TimeMs != tc.want {
			t.Errorf("time %s: got %+v %+v, want %d", tc.raw, b.Events, fails, tc.want)
		}
	}
}

func TestInsertIDBoundaries(t *testing.T) {
	id36 := strings.Repeat("a", 30) + "-0Z9-x"
	if e := mustEvent(t, strictOpts(), ev(`"$insert_id":"`+id36+`"`)); e.InsertID != id36 {
		t.Errorf("36-byte id: %q", e.InsertID)
	}
	if f := mustFail(t, strictOpts(), ev(`"$insert_id":"`+id36+`a"`)); f.Field != "properties.$insert_id" {
		t.Errorf("37-byte id: %+v", f)
	}
	for _, ok := range []string{"a", "Z", "9", "-", "1-2"} {
		if e := mustEvent(t, strictOpts(), ev(`"$insert_id":"`+ok+`"`)); e.InsertID != ok {
			t.Errorf("id %q: %q", ok, e.InsertID)
		}
	}
}

func TestTruncation(t *testing.T) {
	long := strings.Repeat("a", 300)
	accents := strings.Repeat("é", 300)
	rec := `{"event":"` + long + `","properties":{"time":1748736000,"distinct_id":"` + accents +
		`","v":"` + long + `","` + long + `":1,"o":{"` + accents + `":["` + accents + `"]},"ok":"` + strings.Repeat("é", 255) + `"}}`
	e := mustEvent(t, strictOpts(), rec)
	a255, e255 := strings.Repeat("a", 255), strings.Repeat("é", 255)
	if e.Name != a255 || e.DistinctID != e255 {
		t.Errorf("name %d runes, distinct_id %q", len(e.Name), e.DistinctID)
	}
	want := `{"v":"` + a255 + `","` + a255 + `":1,"o":{"` + e255 + `":["` + e255 + `"]},"ok":"` + e255 + `"}`
	if string(e.Props) != want {
		t.Errorf("props\n got %s\nwant %s", e.Props, want)
	}
}

func TestUTF8(t *testing.T) {
	const bad = "\xff"
	tests := []struct{ name, rec, field string }{
		{"event name", `{"event":"a` + bad + `","properties":{"time":1748736000,"distinct_id":"u"}}`, "event"},
		{"value", ev(`"utm_source":"x` + bad + `"`), "properties.utm_source"},
		{"key", ev(`"k` + bad + `":1`), "properties.k\uFFFD"},
		{"nested value", ev(`"o":{"a":["` + bad + `"]}`), "properties.o"},
		{"nested key", ev(`"o":{"` + bad + `":1}`), "properties.o"},
		{"distinct_id", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u` + bad + `"}}`, "properties.distinct_id"},
		{"truncated UTF-8 sequence", ev("\"s\":\"\xe2\x82\""), "properties.s"},
		{"overlong encoding", ev("\"s\":\"\xc0\xaf\""), "properties.s"},
		{"encoded surrogate", ev("\"s\":\"\xed\xa0\x80\""), "properties.s"},
		{"lone high surrogate escape", ev(`"s":"a\ud800b"`), "properties.s"},
		{"lone low surrogate escape", ev(`"s":"\udc00"`), "properties.s"},
		{"high surrogate then non-surrogate", ev(`"s":"\ud800\u0041"`), "properties.s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFail(t, strictOpts(), tc.rec)
			if f.Field != tc.field || f.Message != tc.field+" is invalid: string should be valid utf8" {
				t.Errorf("got field %q message %q", f.Field, f.Message)
			}
		})
	}
}

func TestCountLimits(t *testing.T) {
	// 252 extra + time + distinct_id = 254 properties: accepted.
	mustEvent(t, strictOpts(), ev(props(252)))
	f := mustFail(t, strictOpts(), ev(props(253)))
	if f.Field != "properties.p252" || f.Message != "'properties' is invalid: an event must have fewer than 255 properties" {
		t.Errorf("255 properties: %+v", f)
	}
	mustEvent(t, strictOpts(), ev(`"o":{`+props(254)+`}`))
	f = mustFail(t, strictOpts(), ev(`"x":1,"o":{`+props(255)+`}`))
	if f.Field != "properties.o" || f.Message != "'properties.o' is invalid: nested objects must have fewer than 255 keys" {
		t.Errorf("255 keys: %+v", f)
	}
	items := strings.TrimSuffix(strings.Repeat("1,", 254), ",")
	mustEvent(t, strictOpts(), ev(`"a":[`+items+`]`))
	f = mustFail(t, strictOpts(), ev(`"a":[[`+items+`,1]]`))
	if f.Field != "properties.a" || f.Message != "'properties.a' is invalid: arrays must have fewer than 255 items" {
		t.Errorf("255 items: %+v", f)
	}
}

func TestDepth(t *testing.T) {
	ok := []string{
		nest(3, "1"), nest(3, `"s"`), nest(2, "[1]"), `[[[1]]]`, `[[{"a":1}]]`, `[{"a":[]}]`,
	}
	for _, v := range ok {
		mustEvent(t, strictOpts(), ev(`"d":`+v))
	}
	bad := []string{nest(4, "1"), nest(3, "{}"), nest(3, "[]"), `[[[[]]]]`, `[[{"a":[]}]]`}
	for _, v := range bad {
		f := mustFail(t, strictOpts(), ev(`"d":`+v))
		if f.Field != "properties.d" || f.Message != "'properties.d' is invalid: nesting depth must be at most 3" {
			t.Errorf("%s: %+v", v, f)
		}
		// Limits hold in lenient mode too.
		if f := mustFail(t, lenientOpts(), ev(`"d":`+v)); f.Field != "properties.d" {
			t.Errorf("lenient %s: %+v", v, f)
		}
	}
}
