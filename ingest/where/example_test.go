package where_test

import (
	"errors"
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/where"
)

// Compile once, then match rows: here parsed JSON objects, as the profile
// API holds them. Event readers pass their own Row that also answers
// built-in fields such as distinct_id and time.
func Example_filter() {
	e, err := where.Parse(`properties["plan"] in ["pro", "team"] and (properties["seats"] > 5 or "beta" in user["flags"])`)
	if err != nil {
		panic(err)
	}
	var p fastjson.Parser
	for _, doc := range []string{
		`{"plan":"pro","seats":10}`,
		`{"plan":"team","seats":2,"flags":["beta"]}`,
		`{"plan":"free","seats":50}`,
		`{"plan":"pro","seats":"10"}`, // a string is never greater than a number
	} {
		v, _ := p.Parse(doc)
		fmt.Println(e.Match(where.JSON{V: v}), doc)
	}
	fmt.Println(e)

	// A parse error carries the byte offset, for a 400 that points at it.
	_, err = where.Parse(`defined(properties["plan"] and properties["n"] == 1)`)
	var se *where.SyntaxError
	fmt.Println(errors.Is(err, where.ErrBadWhere), errors.As(err, &se), se.Offset)
	fmt.Println(err)
	// Output:
	// true {"plan":"pro","seats":10}
	// true {"plan":"team","seats":2,"flags":["beta"]}
	// false {"plan":"free","seats":50}
	// false {"plan":"pro","seats":"10"}
	// properties["plan"] in ["pro","team"] and (properties["seats"] > 5 or "beta" in user["flags"])
	// true true 27
	// where: position 27: expected ')' but found "and"
}
