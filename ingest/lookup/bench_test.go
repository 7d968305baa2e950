package lookup

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkParse parses a 100k-row table of typical cells (about 7 MB).
func BenchmarkParse(b *testing.B) {
	var csv bytes.Buffer
	csv.WriteString("item_id,name,price,in_stock,added,tags\n")
	for i := range 100_000 {
		fmt.Fprintf(&csv, "item-%07d,Product number %d,%d.99,%v,2024-05-%02dT10:00:00Z,\"[\"\"c%d\"\",\"\"sale\"\"]\"\n",
			i, i, i%500, i%3 == 0, i%28+1, i%40)
	}
	b.SetBytes(int64(csv.Len()))
	b.ReportAllocs()
	for b.Loop() {
		tab, err := Parse(bytes.NewReader(csv.Bytes()), Options{})
		if err != nil || tab.Len() != 100_000 {
			b.Fatal(err)
		}
	}
}
