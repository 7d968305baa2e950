package record

import (
	"slices"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func TestLenientCoercions(t *testing.T) {
	tests := []struct {
		name, rec       string
		timeMs          int64
		distinctID, iid string
		props           string
	}{
		{"missing time is now", `{"event":"e","properties":{"distinct_id":"u"}}`, now.UnixMilli(), "u", "", `{}`},
		{"null time is now", `{"event":"e","properties":{"time":null,"distinct_id":"u"}}`, now.UnixMilli(), "u", "", `{}`},
		{"numeric string time", `{"event":"e","properties":{"time":"1748736000","distinct_id":"u"}}`, nowS * 1000, "u", "", `{}`},
		{"padded float string time", `{"event":"e","properties":{"time":" 1748736000123.4 ","distinct_id":"u"}}`, nowS*1000 + 123, "u", "", `{}`},
		{"missing distinct_id", `{"event":"e","properties":{"time":1748736000}}`, nowS * 1000, "", "", `{}`},
		{"$distinct_id used", `{"event":"e","properties":{"time":1748736000,"$distinct_id":"alt"}}`, nowS * 1000, "alt", "", `{"$distinct_id":"alt"}`},
		{"distinct_id wins over $distinct_id", `{"event":"e","properties":{"time":1748736000,"distinct_id":"a","$distinct_id":"b"}}`, nowS * 1000, "a", "", `{"$distinct_id":"b"}`},
		{"number distinct_id", `{"event":"e","properties":{"time":1748736000,"distinct_id":12345}}`, nowS * 1000, "12345", "", `{}`},
		{"float distinct_id keeps its text", `{"event":"e","properties":{"time":1748736000,"distinct_id":1.50}}`, nowS * 1000, "1.50", "", `{}`},
		{"bool distinct_id", `{"event":"e","properties":{"time":1748736000,"distinct_id":true}}`, nowS * 1000, "", "", `{}`},
		{"placeholder distinct_id", `{"event":"e","properties":{"time":1748736000,"distinct_id":"null"}}`, nowS * 1000, "", "", `{}`},
		{"NUL in distinct_id replaced", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u\u0000"}}`, nowS * 1000, "u\uFFFD", "", `{}`},
		{"invalid insert_id dropped", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u","$insert_id":"a_b"}}`, nowS * 1000, "u", "", `{}`},
		{"number insert_id dropped", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u","$insert_id":5}}`, nowS * 1000, "u", "", `{}`},
		{"valid insert_id kept", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u","$insert_id":"ok-1"}}`, nowS * 1000, "u", "ok-1", `{}`},
		{"invalid UTF-8 replaced", "{\"event\":\"e\",\"properties\":{\"time\":1748736000,\"distinct_id\":\"u\xff\",\"k\xfe\":\"a\xffb\"}}",
			nowS * 1000, "u\uFFFD", "", `{"k` + "\uFFFD" + `":"a` + "\uFFFD" + `b"}`},
		{"lone surrogate replaced", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u","s":"a\ud800\u0041"}}`,
			nowS * 1000, "u", "", `{"s":"a` + "\uFFFD" + `A"}`},
		{"unknown top-level keys ignored", `{"event":"e","properties":{"time":1748736000,"distinct_id":"u"},"$set":{"a":1}}`, nowS * 1000, "u", "", `{}`},
		{"missing properties", `{"event":"e"}`, now.UnixMilli(), "", "", `{}`},
		{"duplicate keys: first wins", `{"event":"e","event":"f","properties":{"time":1748736000,"distinct_id":"u","a":1,"a":2,"time":5}}`,
			nowS * 1000, "u", "", `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEvent(t, lenientOpts(), tc.rec)
			if e.TimeMs != tc.timeMs || e.DistinctID != tc.distinctID || e.InsertID != tc.iid || string(e.Props) != tc.props {
				t.Errorf("got time %d id %q iid %q props %s", e.TimeMs, e.DistinctID, e.InsertID, e.Props)
			}
			if tc.iid == "" && e.Dedupable() {
				t.Errorf("event without a valid $insert_id must not be deduplicated")
			}
			if tc.name == "duplicate keys: first wins" && e.Name != "e" {
				t.Errorf("name %q", e.Name)
			}
		})
	}
}

func TestLenientStillFails(t *testing.T) {
	tests := []struct{ name, rec, field string }{
		{"missing event", `{"properties":{}}`, "event"},
		{"empty event", `{"event":"","properties":{}}`, "event"},
		{"number event", `{"event":1,"properties":{}}`, "event"},
		{"properties not object", `{"event":"e","properties":"x"}`, "properties"},
		{"time too old", `{"event":"e","properties":{"time":1}}`, "properties.time"},
		{"time too far ahead", `{"event":"e","properties":{"time":1748739601}}`, "properties.time"},
		{"time not numeric", `{"event":"e","properties":{"time":"2025-06-01"}}`, "properties.time"},
		{"time NaN string", `{"event":"e","properties":{"time":"NaN"}}`, "properties.time"},
		{"time bool", `{"event":"e","properties":{"time":false}}`, "properties.time"},
		{"too many properties", `{"event":"e","properties":{` + props(255) + `}}`, "properties.p254"},
		{"object too big", `{"event":"e","properties":{"o":{` + props(255) + `}}}`, "properties.o"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if f := mustFail(t, lenientOpts(), tc.rec); f.Field != tc.field {
				t.Errorf("got %+v", f)
			}
		})
	}
}

func TestMixedBatch(t *testing.T) {
	recs := []string{
		ev(`"n":0`),
		`{"event":"e","properties":{"time":"x","distinct_id":"u","$insert_id":"bad-1"}}`,
		ev(`"n":2`),
		`not json`,
		mergeRec(`"$distinct_ids":["a","b"],"token":"tok123"`),
		ev(`"n":5,"$insert_id":"i5"`),
		`{"event":"e","properties":{"time":1748736000,"distinct_id":"u"},"extra":1}`,
	}
	in := make([][]byte, len(recs))
	for i, r := range recs {
		in[i] = []byte(r)
	}
	var d Decoder
	var b store.Batch
	fails := d.Decode(strictOpts(), in, &b)
	if b.Project != 7 {
		t.Errorf("project %d", b.Project)
	}
	var got []string
	for _, e := range b.Events {
		got = append(got, string(e.Props))
	}
	if want := []string{`{"n":0}`, `{"n":2}`, `{"n":5}`}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if len(b.Merges) != 1 {
		t.Errorf("merges %d", len(b.Merges))
	}
	var idx []int
	for _, f := range fails {
		idx = append(idx, f.Index)
	}
	if !slices.Equal(idx, []int{1, 3, 6}) || fails[0].InsertID != "bad-1" || fails[2].Field != "extra" {
		t.Errorf("failures %+v", fails)
	}

	// The Decoder is reusable: a second batch appends, and the first batch's
	// strings are unaffected (only Props alias the arena).
	first := b.Events[0]
	var b2 store.Batch
	if f := d.Decode(strictOpts(), in[:1], &b2); len(f) != 0 || len(b2.Events) != 1 {
		t.Fatalf("second decode: %+v", f)
	}
	if first.Name != "e" || first.DistinctID != "u1" {
		t.Errorf("strings changed after reuse: %+v", first)
	}
	if f := d.Decode(strictOpts(), nil, &b2); f != nil {
		t.Errorf("empty batch: %+v", f)
	}
	// Reset after a large record drops the grown buffers; decoding still works.
	big := ev(`"s":"` + strings.Repeat("x", 100<<10) + `"`)
	d.Decode(strictOpts(), [][]byte{[]byte(big)}, &b2)
	d.Reset()
	if d.maxRec != 0 || cap(d.fixed) != 0 {
		t.Errorf("Reset kept large buffers")
	}
	var b3 store.Batch
	if f := d.Decode(strictOpts(), in[:1], &b3); len(f) != 0 || string(b3.Events[0].Props) != `{"n":0}` {
		t.Errorf("decode after Reset: %+v %+v", f, b3.Events)
	}
}
