package record

import (
	"strings"
	"testing"
)

const (
	msgTimeWant = "'properties.time' is invalid: must be specified as seconds since epoch"
	// A time out of range names the range it broke.
	msgFutureWant = "'properties.time' is invalid: more than 1 hour in the future by the server clock"
	msgIIDWant    = "'properties.$insert_id' is invalid: must be 1 to 36 characters of A-Z, a-z, 0-9 or '-', and not a placeholder value"
)

func TestStrictFailures(t *testing.T) {
	tests := []struct {
		name, rec, field, msg string
	}{
		{"unknown top-level key", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u"},"foo":1}`,
			"foo", `'foo' is not a valid field: a record has only "event" and "properties"`},
		{"duplicate event key", `{"event":"e","event":"f","properties":{"time":1748736000,"distinct_id":"u"}}`,
			"event", "'event' is invalid: duplicate key"},
		{"missing event", `{"properties":{"time":1748736000,"distinct_id":"u"}}`, "event", msgEvent},
		{"empty event", `{"event":"","properties":{"time":1748736000,"distinct_id":"u"}}`, "event", msgEvent},
		{"number event", `{"event":5,"properties":{"time":1748736000,"distinct_id":"u"}}`, "event", msgEvent},
		{"missing properties", `{"event":"e"}`, "properties", "'properties' is invalid: must be an object"},
		{"null properties", `{"event":"e","properties":null}`, "properties", "'properties' is invalid: must be an object"},
		{"array properties", `{"event":"e","properties":[]}`, "properties", "'properties' is invalid: must be an object"},
		{"not an object", `[1,2]`, "", `invalid record: must be a JSON object with "event" and "properties"`},
		{"string record", `"x"`, "", `invalid record: must be a JSON object with "event" and "properties"`},

		{"time missing", `{"event":"e","properties":{"distinct_id":"u"}}`, "properties.time", msgTimeWant},
		{"time string", `{"event":"e","properties":{"time":"1748736000","distinct_id":"u"}}`, "properties.time", msgTimeWant},
		{"time bool", `{"event":"e","properties":{"time":true,"distinct_id":"u"}}`, "properties.time", msgTimeWant},
		{"time null", `{"event":"e","properties":{"time":null,"distinct_id":"u"}}`, "properties.time", msgTimeWant},
		{"time negative", `{"event":"e","properties":{"time":-1748736000,"distinct_id":"u"}}`, "properties.time", msgTimeBefore},
		{"time zero", `{"event":"e","properties":{"time":0,"distinct_id":"u"}}`, "properties.time", msgTimeBefore},
		{"time before 1971 s", `{"event":"e","properties":{"time":31535999,"distinct_id":"u"}}`, "properties.time", msgTimeBefore},
		{"time before 1971 ms", `{"event":"e","properties":{"time":31535999999,"distinct_id":"u"}}`, "properties.time", msgTimeBefore},
		{"time past now+1h s", `{"event":"e","properties":{"time":1748739601,"distinct_id":"u"}}`, "properties.time", msgFutureWant + " (1h0m1s ahead)"},
		{"time past now+1h ms", `{"event":"e","properties":{"time":1748739600001,"distinct_id":"u"}}`, "properties.time", msgFutureWant + " (1h0m0.001s ahead)"},
		{"time huge", `{"event":"e","properties":{"time":1e300,"distinct_id":"u"}}`, "properties.time", msgFutureWant},
		{"time object", `{"event":"e","properties":{"time":{},"distinct_id":"u"}}`, "properties.time", msgTimeWant},

		{"distinct_id missing", `{"event":"e","properties":{"time":1748736000}}`, "properties.distinct_id", msgDistinct},
		{"distinct_id number", `{"event":"e","properties":{"time":1748736000,"distinct_id":42}}`, "properties.distinct_id", msgDistinct},
		{"distinct_id null", `{"event":"e","properties":{"time":1748736000,"distinct_id":null}}`, "properties.distinct_id", msgDistinct},
		{"distinct_id placeholder", `{"event":"e","properties":{"time":1748736000,"distinct_id":" Undefined "}}`,
			"properties.distinct_id", `'properties.distinct_id' is invalid: "Undefined" is a placeholder, not a user id`},
		{"distinct_id with NUL", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u\u0000v"}}`,
			"properties.distinct_id", `'properties.distinct_id'` + msgNUL},
		{"event with NUL", `{"event":"e\u0000","properties":{"time":1748736000,"distinct_id":"u"}}`, "event", `'event'` + msgNUL},

		{"insert_id too long", ev(`"$insert_id":"` + strings.Repeat("a", 37) + `"`), "properties.$insert_id", msgIIDWant},
		{"insert_id empty", ev(`"$insert_id":""`), "properties.$insert_id", msgIIDWant},
		{"insert_id underscore", ev(`"$insert_id":"a_b"`), "properties.$insert_id", msgIIDWant},
		{"insert_id space", ev(`"$insert_id":"a b"`), "properties.$insert_id", msgIIDWant},
		{"insert_id non-ascii", ev(`"$insert_id":"é"`), "properties.$insert_id", msgIIDWant},
		{"insert_id number", ev(`"$insert_id":12345`), "properties.$insert_id", msgIIDWant},
		{"insert_id null", ev(`"$insert_id":null`), "properties.$insert_id", msgIIDWant},
		{"insert_id zero uuid", ev(`"$insert_id":"00000000-0000-0000-0000-000000000000"`), "properties.$insert_id", msgIIDWant},
		{"insert_id placeholder", ev(`"$insert_id":"NA"`), "properties.$insert_id", msgIIDWant},

		{"duplicate property", ev(`"a":1,"a":2`), "properties.a", "'properties.a' is invalid: duplicate key"},
		{"duplicate time", ev(`"time":1`), "properties.time", "'properties.time' is invalid: duplicate key"},
		{"duplicate among many (hash path)", ev(props(30) + `,"p3":1`), "properties.p3", "'properties.p3' is invalid: duplicate key"},
		{"duplicate after unescape", ev(`"a":1,"\u0061":2`), "properties.a", "'properties.a' is invalid: duplicate key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFail(t, strictOpts(), tc.rec)
			if f.Field != tc.field || f.Message != tc.msg {
				t.Errorf("got field %q message %q\nwant field %q message %q", f.Field, f.Message, tc.field, tc.msg)
			}
		})
	}
}

func TestInvalidJSON(t *testing.T) {
	for _, rec := range []string{
		`{"event":`, `{"event":"e",}`, `{"event":"e" "properties":{}}`, `{event:"e"}`,
		`{"event":"e","properties":{"time":NaN}}`, `{"event":"e","properties":{"x":01}}`,
		`{"event":"e","properties":{"x":1.}}`, `{"event":"e","properties":{"x":-}}`,
		`{"event":"e","properties":{"x":+1}}`, `{"event":"e","properties":{"x":1e}}`,
		`{"event":"e","properties":{"x":"a\x"}}`, `{"event":"e","properties":{"x":"\u12G4"}}`,
		"{\"event\":\"e\",\"properties\":{\"x\":\"a\tb\"}}", `{"event":"e","properties":{"x":tru}}`,
		`{"event":"e","properties":{}}}`, `{"event":"e","properties":{]}`, `{"a":[1,2}`,
		`{"event":"e","properties":{}} x`, ``, `   `, strings.Repeat("[", 257) + "1" + strings.Repeat("]", 257),
	} {
		f := mustFail(t, strictOpts(), rec)
		if f.Field != "" || !strings.HasPrefix(f.Message, "invalid JSON: ") {
			t.Errorf("%q: got field %q message %q", rec, f.Field, f.Message)
		}
		// Lenient mode fails malformed JSON too.
		if f := mustFail(t, lenientOpts(), rec); f.Field != "" {
			t.Errorf("lenient %q: field %q", rec, f.Field)
		}
	}
}

func TestPlaceholderIDs(t *testing.T) {
	for _, p := range placeholders {
		for _, v := range []string{p, strings.ToUpper(p), "  " + p + " "} {
			rec := `{"event":"e","properties":{"time":1748736000,"distinct_id":"` + v + `"}}`
			if f := mustFail(t, strictOpts(), rec); f.Field != "properties.distinct_id" {
				t.Errorf("distinct_id %q: field %q", v, f.Field)
			}
			if len(v) <= 36 && ValidInsertID(v) {
				t.Errorf("$insert_id %q accepted", v)
			}
		}
	}
	// Near misses are ordinary ids.
	for _, v := range []string{"", "  ", "nulls", "anon1", "00", "-2", "0-0"} {
		rec := `{"event":"e","properties":{"time":1748736000,"distinct_id":"` + v + `"}}`
		if e := mustEvent(t, strictOpts(), rec); e.DistinctID != v {
			t.Errorf("distinct_id %q stored as %q", v, e.DistinctID)
		}
	}
}

func TestFailureInsertID(t *testing.T) {
	// A failure carries the record's $insert_id whenever it is a string, even
	// an invalid one, so clients can match failures to their events.
	rec := `{"event":"e","properties":{"time":"x","distinct_id":"u","$insert_id":"abc-1"}}`
	if f := mustFail(t, strictOpts(), rec); f.InsertID != "abc-1" || f.Field != "properties.time" {
		t.Errorf("got %+v", f)
	}
	rec = ev(`"$insert_id":"a_b"`)
	if f := mustFail(t, strictOpts(), rec); f.InsertID != "a_b" {
		t.Errorf("got %+v", f)
	}
	rec = `{"event":"e","properties":{"time":1748736000,"distinct_id":"u","$insert_id":7},"x":1}`
	if f := mustFail(t, strictOpts(), rec); f.InsertID != "" || f.Field != "x" {
		t.Errorf("got %+v", f)
	}
	if f := mustFail(t, strictOpts(), `{"event":`); f.InsertID != "" {
		t.Errorf("got %+v", f)
	}
}
