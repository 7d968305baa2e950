package lookup

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestStream: batches of BatchRows rows, in order, with the rows Parse
// would build; the first bad row ends the stream, naming row and line.
func TestStream(t *testing.T) {
	var b strings.Builder
	b.WriteString("\uFEFFid,n,tags\n")
	for i := range 25 {
		fmt.Fprintf(&b, "k%d,%d,\"[\"\"x\"\"]\"\n", i, i)
	}
	tab, err := Parse(strings.NewReader(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStream(strings.NewReader(b.String()), Options{BatchRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Columns(), ","); got != "id,n,tags" {
		t.Fatalf("columns %q", got)
	}
	var sizes []int
	row := 0
	for {
		batch, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, batch.Len())
		for i := range batch.Len() {
			if batch.Key(i) != tab.Key(row) || string(batch.Row(i)) != string(tab.Row(row)) {
				t.Fatalf("row %d: %s %s, want %s %s", row, batch.Key(i), batch.Row(i), tab.Key(row), tab.Row(row))
			}
			row++
		}
	}
	if fmt.Sprint(sizes) != "[10 10 5]" || s.Rows() != 25 || s.Err() != nil {
		t.Fatalf("batches %v, rows %d, err %v", sizes, s.Rows(), s.Err())
	}

	bad := []struct{ csv, msg string }{
		{"id,v\na,1\nb,2\na,3\n", `row 3 (line 4): duplicate primary key "a" (first in row 1)`},
		{"id,v\na,1\nb\n", "row 2 (line 3): invalid row: wrong number of fields: got 1, want 2"},
		{"id,v\na,1\n,2\n", "row 2 (line 3): primary key is required"},
		{"id,v\na,1\nb,\xff\n", `row 2 (line 3): column "v": value is not valid UTF-8`},
	}
	for _, tc := range bad {
		s, err := NewStream(strings.NewReader(tc.csv), Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Next()
		var re *RowErrors
		if !errors.As(err, &re) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.msg) || s.Err() != err {
			t.Errorf("%q: %v, want %q", tc.csv, err, tc.msg)
		}
		if _, again := s.Next(); again != err {
			t.Errorf("%q: Next after the error: %v", tc.csv, again)
		}
	}
	if _, err := NewStream(strings.NewReader("id\na\n"), Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("one-column header: %v", err)
	}
	// Over MaxBytes: refused as soon as the limit is read past, whether
	// that is within the header's read-ahead or later.
	for _, n := range []int{2000, 5000} {
		var body strings.Builder
		body.WriteString("id,v\n")
		for i := range n {
			fmt.Fprintf(&body, "k%d,1\n", i)
		}
		s, err := NewStream(strings.NewReader(body.String()), Options{MaxBytes: 10000, BatchRows: 10})
		if err == nil {
			for err == nil {
				_, err = s.Next()
			}
		}
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%d rows over MaxBytes: %v", n, err)
		}
	}
}
