package profile

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to both parsers and applies whatever
// parses, checking what the handlers and stores rely on: errors are typed,
// values are valid JSON, Apply is atomic, and profiles round-trip.
func FuzzParse(f *testing.F) {
	f.Add([]byte(user(`"$set":{"a":1,"l":["x",1]}`)), false)
	f.Add([]byte(user(`"$union":{"l":["x",1,1.0,"1"]}`)), false)
	f.Add([]byte(user(`"$add":{"a":1.5}`)), false)
	f.Add([]byte(user(`"$remove":{"l":"x"}`)), false)
	f.Add([]byte(user(`"$unset":["a"],"$time":1700000000.5`)), false)
	f.Add([]byte(user(`"$append":{"l":{"k":"\ud800"}}`)), false)
	f.Add([]byte(`{"token":"t","$group_key":"k","$group_id":1,"$delete":null}`), true)
	f.Add([]byte(`{"$token":"t","$distinct_id":"u","$set":{"\u0000":"\u2028"},"$ip":0}`), false)
	f.Fuzz(func(t *testing.T, data []byte, isGroup bool) {
		var ps Parser
		parse := ps.ParseUser
		if isGroup {
			parse = ps.ParseGroup
		}
		u, err := parse(data)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || category(err) == nil {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if u.Op < OpSet || u.Op > OpDelete || !u.Kind.Supports(u.Op) {
			t.Fatalf("bad op %v for %v", u.Op, u.Kind)
		}
		for _, pr := range u.Props {
			if pr.Name == "" || !json.Valid(pr.Value) {
				t.Fatalf("bad operand %q = %q", pr.Name, pr.Value)
			}
		}
		// Apply to an empty profile and to one that already has values of
		// every type under the names the update touches.
		var seeded Profile
		for i, pr := range u.Props {
			seed := [...]string{`1`, `"s"`, `[1,"1",{"a":[]}]`, `null`, `{"k":1}`}[i%5]
			seeded.set(pr.Name, []byte(seed))
		}
		seeded.exists = len(u.Props) > 0
		for _, p := range []*Profile{{}, &seeded} {
			before := string(p.AppendJSON(nil))
			if err := Apply(p, u, nowMs); err != nil {
				if category(err) == nil {
					t.Fatalf("untyped apply error %v", err)
				}
				if after := string(p.AppendJSON(nil)); after != before {
					t.Fatalf("failed apply changed %s to %s", before, after)
				}
				continue
			}
			out := p.AppendJSON(nil)
			if !json.Valid(out) {
				t.Fatalf("invalid profile JSON %s", out)
			}
			var q Profile
			if err := q.UnmarshalJSON(out); err != nil {
				t.Fatalf("unmarshal %s: %v", out, err)
			}
			if again := q.AppendJSON(nil); string(again) != string(out) {
				t.Fatalf("round trip %s -> %s", out, again)
			}
		}
	})
}
