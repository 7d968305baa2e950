package lookup_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/ingest/lookup"
)

func Example() {
	csv := `sku,name,price,launched,tags
A-1,Widget,9.5,2024-03-01T10:00:00+01:00,"[""new"",""sale""]"
B-2,Gadget,,2023-11-20T08:30:00Z,
`
	tab, err := lookup.Parse(strings.NewReader(csv), lookup.Options{})
	if err != nil {
		panic(err)
	}
	row, _ := tab.Lookup("A-1")
	fmt.Println(tab.Len(), string(row))
	row, _ = tab.Lookup("B-2")
	fmt.Println(string(row))

	// Bad rows are all reported (the first 10), with their position.
	_, err = lookup.Parse(strings.NewReader("sku,name\nA-1,x\n,y\nA-1,z\n"), lookup.Options{})
	var re *lookup.RowErrors
	if errors.As(err, &re) {
		for _, r := range re.Rows {
			fmt.Printf("row %d (line %d): %s\n", r.Row, r.Line, r.Message)
		}
	}
	// Output:
	// 2 {"sku":"A-1","name":"Widget","price":9.5,"launched":"2024-03-01T09:00:00Z","tags":["new","sale"]}
	// {"sku":"B-2","name":"Gadget","launched":"2023-11-20T08:30:00Z"}
	// row 2 (line 3): primary key is required and cannot be blank
	// row 3 (line 4): duplicate primary key "A-1" (first in row 1)
}
