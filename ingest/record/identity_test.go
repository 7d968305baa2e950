package record

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

// TestIdentityChanges: each mode turns its identity events into changes
// that point at their event; the other mode's events have no effect.
func TestIdentityChanges(t *testing.T) {
	const uuid = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	recs := []string{
		`{"event":"a","properties":{"time":1700000000,"$user_id":"u1","$device_id":"d1","$insert_id":"x1"}}`,
		`{"event":"b","properties":{"time":1700000000,"$device_id":"d2"}}`,
		`{"event":"$identify","properties":{"time":1700000000,"$identified_id":"u2","$anon_id":"` + uuid + `"}}`,
		`{"event":"$create_alias","properties":{"time":1700000000,"distinct_id":"u3","alias":"u3-alias"}}`,
		`{"event":"c","properties":{"time":1700000000,"distinct_id":"plain"}}`,
	}
	tests := []struct {
		mode    identity.Mode
		ids     []string
		changes []store.Change
	}{
		{identity.Simplified, []string{"u1", "$device:d2", "$identify", "u3", "plain"}, []store.Change{
			{Change: identity.Change{Kind: identity.KindLink, A: "u1", B: "d1"}, Event: 0, Ref: 0},
		}},
		{identity.Original, []string{"", "", "u2", "u3", "plain"}, []store.Change{
			{Change: identity.Change{Kind: identity.KindIdentify, A: "u2", B: uuid}, Event: 2, Ref: 2},
			{Change: identity.Change{Kind: identity.KindAlias, A: "u3-alias", B: "u3"}, Event: 3, Ref: 3},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			in := make([][]byte, len(recs))
			for i, r := range recs {
				in[i] = []byte(r)
			}
			// The Simplified $identify record has no distinct_id of its own:
			// lenient mode keeps it anonymous, as /track does.
			var d Decoder
			var out store.Batch
			if fails := d.Decode(Options{Project: 1, Mode: tc.mode, Now: time.Unix(1700000100, 0)}, in, &out); len(fails) != 0 {
				t.Fatalf("failures: %+v", fails)
			}
			var ids []string
			for _, e := range out.Events {
				ids = append(ids, e.DistinctID)
			}
			if tc.mode == identity.Simplified {
				ids[2] = out.Events[2].Name
			}
			if !reflect.DeepEqual(ids, tc.ids) {
				t.Errorf("distinct ids %q, want %q", ids, tc.ids)
			}
			if !reflect.DeepEqual(out.Changes, tc.changes) {
				t.Errorf("changes %+v, want %+v", out.Changes, tc.changes)
			}
		})
	}
}

// TestIdentityChangeFailureKeepsIndexes: a record failing after its change
// was recognised leaves no change behind pointing at the next event.
func TestIdentityChangeFailureKeepsIndexes(t *testing.T) {
	in := [][]byte{
		[]byte(`{"event":"$create_alias","properties":{"time":1700000000,"distinct_id":"u","alias":"u"}}`),
		[]byte(`{"event":"e","properties":{"time":1700000000,"distinct_id":"v"}}`),
	}
	var d Decoder
	var out store.Batch
	fails := d.Decode(Options{Project: 1, Mode: identity.Original, Now: time.Unix(1700000100, 0)}, in, &out)
	if len(fails) != 1 || fails[0].Field != "properties.alias" || len(out.Changes) != 0 || len(out.Events) != 1 {
		t.Fatalf("fails %+v, changes %+v, %d events", fails, out.Changes, len(out.Events))
	}
}

// TestIsPlaceholder: the fast checks (untrimmed edges, lengths no
// placeholder has) answer as the plain rule does: trim spaces, then any
// placeholder in any ASCII case.
func TestIsPlaceholder(t *testing.T) {
	plain := func(s string) bool {
		s = strings.TrimSpace(s)
		for _, p := range placeholders {
			if len(p) == len(s) && asciiEqualFold(p, s) {
				return true
			}
		}
		return false
	}
	cases := []string{"", " ", "null", "NULL", " Null\t", "\u00a0null\u00a0", "\u2003undefined", "nil\n", "0", " -1 ",
		"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-0000000000001", "[]", "{ }", "user-1", "nul",
		"nulll", "N/A", "anonymous ", "ANON", "<nil>", "true", "False", "\x00null", "null\x7f", "ﬀ", "ＮＵＬＬ"}
	alphabet := []string{"n", "u", "l", "L", " ", "\t", "\u00a0", "0", "-", "1", "a", "N", "o", "e", "[", "]"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		if got, want := isPlaceholder(s), plain(s); got != want {
			t.Errorf("isPlaceholder(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestIdentifyShapes: Original ID Merge takes $identify in the HTTP API's
// shape ($identified_id, $anon_id) and in the SDKs' (distinct_id and
// $anon_distinct_id, which mixpanel-browser sends as "$device:<uuid>");
// the explicit fields win when both are there.
func TestIdentifyShapes(t *testing.T) {
	const dev = "$device:7c9e6679-7425-40de-944b-e07fc1f90ae7"
	ident := func(props string) string {
		return `{"event":"$identify","properties":{"time":1700000000,"token":"t",` + props + `}}`
	}
	tests := []struct {
		name, rec   string
		did, a, b   string
		field, want string // a failure instead
	}{
		{name: "HTTP API shape", rec: ident(`"$identified_id":"u1","$anon_id":"a1"`), did: "u1", a: "u1", b: "a1"},
		{name: "mixpanel-browser shape", rec: ident(`"distinct_id":"u2","$anon_distinct_id":"` + dev + `","$user_id":"u2","$device_id":"7c9e6679-7425-40de-944b-e07fc1f90ae7"`),
			did: "u2", a: "u2", b: dev},
		{name: "explicit ids win", rec: ident(`"distinct_id":"d3","$identified_id":"u3","$anon_id":"a3","$anon_distinct_id":"x3"`), did: "d3", a: "u3", b: "a3"},
		{name: "numeric user id", rec: ident(`"distinct_id":42,"$anon_distinct_id":"` + dev + `"`), did: "42", a: "42", b: dev},
		{name: "no anonymous id", rec: ident(`"distinct_id":"u4"`), field: "properties.$anon_id",
			want: "'properties.$anon_id' is invalid: $identify needs the anonymous id in $anon_id or $anon_distinct_id"},
		{name: "unusable $anon_id is not replaced", rec: ident(`"distinct_id":"u5","$anon_id":"null","$anon_distinct_id":"` + dev + `"`),
			field: "properties.$anon_id", want: "'properties.$anon_id' is invalid: $identify needs the anonymous id in $anon_id or $anon_distinct_id"},
		{name: "no identified id", rec: ident(`"$anon_distinct_id":"` + dev + `"`), field: "properties.$identified_id",
			want: "'properties.$identified_id' is invalid: $identify needs the identified id in $identified_id or distinct_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var d Decoder
			var out store.Batch
			fails := d.Decode(Options{Project: 1, Mode: identity.Original, Now: time.Unix(1700000100, 0)}, [][]byte{[]byte(tc.rec)}, &out)
			if tc.field != "" {
				if len(fails) != 1 || fails[0].Field != tc.field || fails[0].Message != tc.want || len(out.Changes) != 0 {
					t.Fatalf("fails %+v changes %+v; want field %s message %q", fails, out.Changes, tc.field, tc.want)
				}
				return
			}
			if len(fails) != 0 || len(out.Events) != 1 || out.Events[0].DistinctID != tc.did {
				t.Fatalf("fails %+v events %+v; want one event of %q", fails, out.Events, tc.did)
			}
			want := []store.Change{{Change: identity.Change{Kind: identity.KindIdentify, A: tc.a, B: tc.b}}}
			if !reflect.DeepEqual(out.Changes, want) {
				t.Errorf("changes %+v, want %+v", out.Changes, want)
			}
		})
	}
}
