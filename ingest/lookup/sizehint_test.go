package lookup

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// A size hint only sizes the buffers: the table is the same whatever the
// hint, right or wrong, and bad rows after the first thousand are still
// found.
func TestSizeHint(t *testing.T) {
	var csv bytes.Buffer
	csv.WriteString("id,name,price\n")
	for i := range 5000 {
		name := "n"
		if i > 3000 {
			name = fmt.Sprintf("a longer name than the first rows had %d", i) // rows grow past the estimate
		}
		fmt.Fprintf(&csv, "k%d,%s,%d.5\n", i, name, i)
	}
	want, err := Parse(bytes.NewReader(csv.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(csv.Len())
	for _, hint := range []int64{n, n / 3, n * 10, 1} {
		t.Run(fmt.Sprint(hint), func(t *testing.T) {
			got, err := Parse(bytes.NewReader(csv.Bytes()), Options{SizeHint: hint})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.buf, want.buf) || got.Len() != want.Len() || got.Key(4999) != "k4999" {
				t.Fatalf("table differs with hint %d", hint)
			}
			if row, ok := got.Lookup("k4000"); !ok || !bytes.Contains(row, []byte(`"price":4000.5`)) {
				t.Fatalf("lookup k4000: %s %v", row, ok)
			}
			if hint <= n && cap(got.buf) > int(4*n)+4096 {
				t.Fatalf("buffer capacity %d for a %d-byte CSV", cap(got.buf), n)
			}
		})
	}
	bad := append(bytes.Clone(csv.Bytes()), "k10,dup,1\n"...)
	_, err = Parse(bytes.NewReader(bad), Options{SizeHint: int64(len(bad))})
	var re *RowErrors
	if !errors.As(err, &re) || re.Total != 1 || re.Rows[0].Row != 5001 {
		t.Fatalf("duplicate after the reserve point: %v", err)
	}
}
