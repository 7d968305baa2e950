package profile

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// setOf builds a $set of n properties named prefix0…prefix(n-1).
func setOf(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(`"$set":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + prefix + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	b.WriteByte('}')
	return b.String()
}

func TestPropertyLimit(t *testing.T) {
	var p Profile
	// $last_seen is maintained by the service and does not count.
	full := `{"$token":"tok","$distinct_id":"u1",` + setOf("p", MaxProperties) + `}`
	if err := run(t, &p, full); err != nil {
		t.Fatalf("2000 properties: %v", err)
	}
	if p.Len() != MaxProperties+1 {
		t.Fatalf("len %d", p.Len())
	}
	before := jsonOf(&p)
	for _, op := range []string{`"$set":{"new":1}`, `"$set_once":{"new":1}`, `"$add":{"new":1}`,
		`"$union":{"new":[1]}`, `"$append":{"new":1}`, `"$set":{"p0":5,"new":1}`} {
		err := run(t, &p, user(op))
		var fe *FieldError
		if !errors.Is(err, ErrTooManyProperties) || !errors.As(err, &fe) {
			t.Fatalf("%s: %v", op, err)
		}
		if jsonOf(&p) != before {
			t.Fatalf("%s changed the profile", op)
		}
	}
	// Updating existing properties, or removing one first, still works.
	if err := run(t, &p, user(`"$set":{"p0":"x"}`), user(`"$add":{"p1":1}`), user(`"$unset":["p2"]`), user(`"$set":{"new":1}`)); err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Get("new"); string(v) != "1" {
		t.Fatalf("new = %s", v)
	}

	var q Profile
	if err := run(t, &q, user(setOf("p", MaxProperties+1))); !errors.Is(err, ErrTooManyProperties) || q.Exists() {
		t.Fatalf("2001 at once: %v, exists %v", err, q.Exists())
	}
}

func TestValueLimit(t *testing.T) {
	var p Profile
	big := strings.Repeat("x", 200<<10)
	if err := run(t, &p, user(`"$append":{"l":"`+big+`"}`)); err != nil {
		t.Fatal(err)
	}
	err := run(t, &p, user(`"$union":{"l":["`+big[1:]+`"]}`))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v", err)
	}
	if v, _ := p.Get("l"); len(v) != len(big)+4 {
		t.Fatalf("list changed: %d bytes", len(v))
	}
}
