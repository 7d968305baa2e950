package jsonw

import (
	"encoding/json"
	"testing"
)

func TestStringRoundTrips(t *testing.T) {
	cases := []string{"", "plain", `q"uote\back`, "nl\n\r\t", "\x00\x1f", "héllo 世界 🎉", "\u2028\u2029", "\xff bad"}
	for _, in := range cases {
		out := String(nil, in)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q -> %s: invalid JSON: %v", in, out, err)
		}
		want := in
		if in == "\xff bad" {
			want = "\ufffd bad"
		}
		if got != want {
			t.Fatalf("%q -> %s decodes to %q, want %q", in, out, got, want)
		}
	}
}
