package profile

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestMarshalRoundTrip(t *testing.T) {
	var p Profile
	if err := run(t, &p, user(`"$set":{"z":1,"a":{"k":[1,"x"]},"m":"é\""}`), user(`"$union":{"l":[1,"1"]}`)); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z":1,"a":{"k":[1,"x"]},"m":"é\"","l":[1,"1"]}`
	if string(b) != want {
		t.Fatalf("marshal %s, want %s", b, want)
	}
	var q Profile
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !q.Exists() || jsonOf(&q) != want {
		t.Fatalf("round trip %s", jsonOf(&q))
	}
	// The copy behaves like the original under further updates.
	if err := run(t, &q, user(`"$union":{"l":[1.0,2]}`)); err != nil {
		t.Fatal(err)
	}
	if v, _ := q.Get("l"); string(v) != `[1,"1",2]` {
		t.Fatalf("l = %s", v)
	}
}

func TestMarshalMissingProfile(t *testing.T) {
	var p Profile
	if got := jsonOf(&p); got != "null" {
		t.Fatalf("zero profile %s", got)
	}
	q := Profile{}
	if err := q.UnmarshalJSON([]byte(`{"a":1}`)); err != nil || !q.Exists() {
		t.Fatal(err)
	}
	if err := q.UnmarshalJSON([]byte(` null `)); err != nil || q.Exists() || q.Len() != 0 {
		t.Fatalf("null: %v exists=%v", err, q.Exists())
	}
	if err := q.UnmarshalJSON([]byte(`{}`)); err != nil || !q.Exists() || jsonOf(&q) != `{}` {
		t.Fatalf("empty object: %v %s", err, jsonOf(&q))
	}
}

func TestUnmarshalNormalises(t *testing.T) {
	var p Profile
	if err := p.UnmarshalJSON([]byte(`{ "b" : [ 1 , "\u0078" ], "a":2, "b":3 }`)); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(&p); got != `{"b":3,"a":2}` {
		t.Fatalf("got %s", got)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":NaN}`, `{"a":`, "{\"a\":\"\xff\"}"} {
		if err := p.UnmarshalJSON([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

func TestOrderAndLookupOnLargeProfiles(t *testing.T) {
	var p Profile
	if err := run(t, &p, user(setOf("p", 20))); err != nil {
		t.Fatal(err)
	}
	if err := run(t, &p, user(`"$unset":["p3"]`), user(`"$set":{"p3":"again","p19":"x"}`)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range p.All() {
		names = append(names, name)
	}
	if len(names) != 20 || names[3] != "p4" || names[18] != "p19" || names[19] != "p3" {
		t.Fatalf("order %v", names)
	}
	if v, ok := p.Get("p19"); !ok || string(v) != `"x"` {
		t.Fatalf("p19 = %s", v)
	}
}
