package record

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

// canon builds a record in the canonical shape; rest is the properties
// after $insert_id (without the leading comma).
func canon(name, tm, did, iid, rest string) string {
	r := `{"event":"` + name + `","properties":{"time":` + tm + `,"distinct_id":"` + did + `","$insert_id":"` + iid + `"`
	if rest != "" {
		r += "," + rest
	}
	return r + "}}"
}

const iid36 = "6f1c1a9e-0d3b-4c56-9a7e-1b2c3d4e5f60"

func nested(depth int) string {
	s := `1`
	for range depth {
		s = `{"k":[` + s + `]}`
	}
	return s
}

func members(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":%d`, i, i)
	}
	return b.String()
}

// canonCases are records the canonical path takes (fast = true) and
// records it must hand to the general path; both kinds must decode the
// same with and without Options.Canonical.
var canonCases = []struct {
	rec  string
	fast bool // in every ID mode
}{
	{canon("e", "1748736000000", "u1", iid36, ""), true},
	{canon("e", "1748736000000", "u1", iid36, `"a":"x","b":1.5e3,"c":true,"d":null,"e":[1,"y",{"z":[]}],"f":{}`), true},
	{canon("Ünïcode ✓", "1748736000000", "ü", "abc", `"ключ":"значение"`), true},
	{canon("e", "1748736000000", "u1", iid36, `"a":`+nested(1)), true},
	{canon("e", "1748736000000", "u1", iid36, `"a":[[[1]]]`), true},
	{canon("e", "1748736000000", "u1", iid36, members(251)), true},
	{canon("e", "1748736000000", strings.Repeat("d", 255), iid36, `"v":"`+strings.Repeat("v", 255)+`"`), true},
	{canon("e", "1748736000000", "u1", iid36, `"$warehouse_import_id":"w","$import":true,"$source":"warehouse-import"`), true},
	{canon("e", "1748736000", "u1", iid36, ""), true},      // seconds
	{canon("e", "1748736000000.4", "u1", iid36, ""), true}, // fraction of a ms
	{canon("e", "1748739600000", "u1", iid36, ""), true},   // one hour ahead: the limit
	{canon("e", "31536000000", "u1", iid36, ""), true},     // the earliest time
	{canon("e", "1748739600001", "u1", iid36, ""), false},  // too far ahead
	{canon("e", "31535999999", "u1", iid36, ""), false},    // before 1971
	{canon("e", "-1", "u1", iid36, ""), false},             // negative
	{canon("e", "01", "u1", iid36, ""), false},             // not JSON
	{canon("e", `"1748736000"`, "u1", iid36, ""), false},   // string time
	{canon("e", "1748736000000", "u1", iid36, members(252)), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":`+nested(2)), false}, // depth 4
	{canon("e", "1748736000000", "u1", iid36, `"a":[[[[1]]]]`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":[`+strings.Repeat("1,", 254)+`1]`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":[`+strings.Repeat("1,", 253)+`1]`), true},
	{canon("e", "1748736000000", "u1", iid36, `"a":1,"a":2`), false},
	{canon("e", "1748736000000", "u1", iid36, `"time":2`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":{"b":1,"b":2}`), true}, // nested duplicates are kept
	{canon("e", "1748736000000", "u1", iid36, `"a":"`+strings.Repeat("v", 256)+`"`), false},
	{canon("e", "1748736000000", "u1", iid36, `"`+strings.Repeat("k", 256)+`":1`), false},
	{canon(strings.Repeat("n", 256), "1748736000000", "u1", iid36, ""), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":"x\"y"`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":"\u0041"`), false},
	{canon("e", "1748736000000", "u1", iid36, "\"a\":\"x\ty\""), false},
	{canon("e", "1748736000000", "u1", iid36, "\"a\":\"\xff\""), false},
	{canon("e", "1748736000000", "u1", iid36, "\"a\":\"\xed\xa0\x80\""), false},
	{canon("e", "1748736000000", "u1", iid36, `"a": 1`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":tru`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":1.`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":[1,]`), false},
	{canon("e", "1748736000000", "u1", iid36, `"a":{"b"}`), false},
	{canon("e", "1748736000000", "null", iid36, ""), false},   // placeholder
	{canon("e", "1748736000000", " Anon ", iid36, ""), false}, // placeholder
	{canon("e", "1748736000000", "", iid36, ""), true},        // empty: valid in strict mode
	{canon("e", "1748736000000", "u1", "has space", ""), false},
	{canon("e", "1748736000000", "u1", strings.Repeat("a", 37), ""), false},
	{canon("e", "1748736000000", "u1", "undefined", ""), false},
	{canon("", "1748736000000", "u1", iid36, ""), false},
	{canon("$merge", "1748736000000", "u1", iid36, `"$distinct_ids":["a","b"],"token":"tok123"`), false},
	{canon("e", "1748736000000", "u1", iid36, "") + " ", false},
	{strings.TrimSuffix(canon("e", "1748736000000", "u1", iid36, ""), "}"), false},
	{`{"event":"e","properties":{"distinct_id":"u1","time":1748736000000,"$insert_id":"` + iid36 + `"}}`, false},
	{`{"event":"e","properties":{"time":1748736000000,"distinct_id":"u1"}}`, false},
	{`{"event":"e","properties":{"time":1748736000000,"distinct_id":"u1","$insert_id":"x"},"x":1}`, false},
	{`{"event":"e","properties":{"time":1748736000000,"distinct_id":7,"$insert_id":"x"}}`, false},
	{`{"event":"e","properties":{"time":1748736000000,"distinct_id":"u1","$insert_id":"x",}}`, false},
	{`{"event":"e","properties":{"time":1748736000000,"distinct_id":"u1","$insert_id":"x","a"}}`, false},
	{`{"event":"e","properties":{"time":1748736000000,"distinct_id":"u1","$insert_id":"x","a":}}`, false},
	{`{"event":"e"`, false},
	{`{"event":"e","properties":{"time":1748736000000`, false},
}

// identity-dependent cases: fast in the modes listed.
var canonIDCases = []struct {
	rec  string
	fast []identity.Mode
}{
	{canon("e", "1748736000000", "u1", iid36, `"$user_id":"u1","$device_id":"d1"`), allModes},
	{canon("e", "1748736000000", "$device:d1", iid36, `"$device_id":"d1"`), allModes},
	{canon("e", "1748736000000", "null", iid36, `"$user_id":"u9"`), []identity.Mode{identity.Simplified}},
	{canon("e", "1748736000000", "u1", iid36, `"$user_id":"null"`), []identity.Mode{"", identity.Original}},
	{canon("e", "1748736000000", "u1", iid36, `"$device_id":7`), []identity.Mode{"", identity.Original}},
	{canon("e", "1748736000000", "u1", iid36, `"$user_id":"","$device_id":"d2"`), allModes},
	{canon("$identify", "1748736000000", "u1", iid36, `"$identified_id":"u1","$anon_id":"a1"`), []identity.Mode{"", identity.Simplified}},
	{canon("$create_alias", "1748736000000", "u1", iid36, `"alias":"a1"`), []identity.Mode{"", identity.Simplified}},
}

var allModes = []identity.Mode{"", identity.Original, identity.Simplified}

// decodeBoth decodes recs with and without the canonical path.
func decodeBoth(t testing.TB, opt Options, recs [][]byte) {
	t.Helper()
	var d1, d2 Decoder
	var b1, b2 store.Batch
	opt.Canonical = false
	f1 := d1.Decode(opt, recs, &b1)
	opt.Canonical = true
	f2 := d2.Decode(opt, recs, &b2)
	if !reflect.DeepEqual(f1, f2) {
		t.Fatalf("failures differ:\n general   %+v\n canonical %+v", f1, f2)
	}
	for i := range max(len(b1.Events), len(b2.Events)) {
		if i >= len(b1.Events) || i >= len(b2.Events) || !reflect.DeepEqual(b1.Events[i], b2.Events[i]) {
			t.Fatalf("event %d differs (%d vs %d events)", i, len(b1.Events), len(b2.Events))
		}
	}
	if !reflect.DeepEqual(b1.Changes, b2.Changes) {
		t.Fatalf("changes differ:\n general   %+v\n canonical %+v", b1.Changes, b2.Changes)
	}
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("batches differ (merges or profiles)")
	}
	// Lent records: the same batch, and each record changed at most at
	// one byte, a comma become '{'.
	lent := make([][]byte, len(recs))
	for i, r := range recs {
		lent[i] = bytes.Clone(r)
	}
	var d3 Decoder
	var b3 store.Batch
	opt.Lend = true
	if f3 := d3.Decode(opt, lent, &b3); !reflect.DeepEqual(f1, f3) {
		t.Fatalf("failures differ:\n general %+v\n lent    %+v", f1, f3)
	}
	if !reflect.DeepEqual(b1, b3) {
		t.Fatalf("batches differ:\n general %+v\n lent    %+v", b1, b3)
	}
	for i, r := range recs {
		diff := 0
		for j := range r {
			if r[j] != lent[i][j] {
				diff++
				if r[j] != ',' || lent[i][j] != '{' {
					t.Fatalf("record %d: byte %d %q became %q", i, j, r[j], lent[i][j])
				}
			}
		}
		if diff > 1 {
			t.Fatalf("record %d: %d bytes changed", i, diff)
		}
	}
}

// canonRecords is every record of canonCases and canonIDCases.
func canonRecords() [][]byte {
	var all [][]byte
	for _, c := range canonCases {
		all = append(all, []byte(c.rec))
	}
	for _, c := range canonIDCases {
		all = append(all, []byte(c.rec))
	}
	return all
}

func TestCanonicalMatchesDecode(t *testing.T) {
	all := canonRecords()
	for _, mode := range allModes {
		opt := strictOpts()
		opt.Mode = mode
		for _, r := range all {
			decodeBoth(t, opt, [][]byte{r})
		}
		decodeBoth(t, opt, all) // and as one request: indexes, Changes' refs
	}
}

func TestCanonicalTakesItsShape(t *testing.T) {
	check := func(rec string, mode identity.Mode, want bool) {
		t.Helper()
		opt := strictOpts()
		opt.Mode = mode
		var d Decoder
		var b store.Batch
		if got := d.canonical(&opt, []byte(rec), opt.Now.UnixMilli(), &b, nil); got != want {
			t.Errorf("mode %v: canonical = %v, want %v for %.120s", mode, got, want, rec)
		}
		if !want && (len(b.Events) > 0 || len(b.Changes) > 0 || len(d.arena) > 0) {
			t.Errorf("declined record changed the batch: %.120s", rec)
		}
	}
	for _, c := range canonCases {
		for _, m := range allModes {
			check(c.rec, m, c.fast)
		}
	}
	for _, c := range canonIDCases {
		for _, m := range allModes {
			check(c.rec, m, contains(c.fast, m))
		}
	}
}

func contains(ms []identity.Mode, m identity.Mode) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// FuzzCanonical: for any input, the canonical path and the general path
// give the same events, changes and failures, and so does the canonical
// path trusting an honest vouch (vouchFor).
func FuzzCanonical(f *testing.F) {
	for _, c := range canonCases {
		f.Add([]byte(c.rec), uint8(0))
	}
	for _, c := range canonIDCases {
		f.Add([]byte(c.rec), uint8(2))
	}
	f.Fuzz(func(t *testing.T, rec []byte, mode uint8) {
		opt := strictOpts()
		opt.Mode = allModes[int(mode)%len(allModes)]
		decodeBoth(t, opt, [][]byte{rec, rec})
		decodeVouched(t, opt, [][]byte{rec, rec})
	})
}

// Properties a record also carries through store.Batch.Common count toward
// the limit of 255, on the one-pass path and the general one alike.
func TestCommonPropsCount(t *testing.T) {
	opt := strictOpts()
	opt.CommonProps = 4
	ok := canon("e", "1748736000000", "u1", iid36, members(247)) // 3 + 247 + 4 = 254
	over := canon("e", "1748736000000", "u1", iid36, members(248))
	var d Decoder
	var b store.Batch
	if !d.canonical(&opt, []byte(ok), opt.Now.UnixMilli(), &b, nil) || d.canonical(&opt, []byte(over), opt.Now.UnixMilli(), &b, nil) {
		t.Fatal("the one-pass path did not count the common properties")
	}
	for _, canonical := range []bool{false, true} {
		opt.Canonical = canonical
		if _, fails := decode(t, opt, ok); len(fails) != 0 {
			t.Fatalf("canonical=%v: 254 properties refused: %+v", canonical, fails)
		}
		_, fails := decode(t, opt, over)
		if len(fails) != 1 || fails[0].Message != "'properties' is invalid: an event must have fewer than 255 properties" {
			t.Fatalf("canonical=%v: 255 properties: %+v", canonical, fails)
		}
	}
}
