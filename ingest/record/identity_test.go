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
