package record

import (
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// benchBody returns n realistic events of about 300 bytes as a JSON array.
func benchBody(n int) []byte {
	names := []string{"Page Viewed", "Signed Up", "Added To Cart", "Purchase Completed", "Search"}
	b := []byte{'['}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"event":%q,"properties":{"time":%d,"distinct_id":"user-%06d",`+
			`"$insert_id":"%08x-%04x-4%03x-8%03x-%012x","$browser":"Chrome",`+
			`"$current_url":"https://shop.example.com/p/%d","$screen_width":1920,`+
			`"utm_source":"newsletter","plan":"pro","price":%d.99,"items":["sku-%d","sku-%d"],"logged_in":true}}`,
			names[i%len(names)], nowS*1000-int64(i)*1000, i%5000, i*7919, i%65536, i%4096, (i*31)%4096, i*104729,
			i%1000, 10+i%90, i%977, i%983)
	}
	return append(b, ']')
}

func BenchmarkDecode(b *testing.B) {
	body := benchBody(2000)
	recs, err := Split(body, false, DefaultLimits(), nil)
	if err != nil || len(recs) != 2000 {
		b.Fatal(err)
	}
	var d Decoder
	var out store.Batch
	opt := strictOpts()
	if f := d.Decode(opt, recs, &out); len(f) != 0 {
		b.Fatalf("benchmark events must be valid: %+v", f[0])
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out.Events = out.Events[:0]
		d.Decode(opt, recs, &out)
	}
	b.ReportMetric(float64(b.N)*2000/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkSplit(b *testing.B) {
	body := benchBody(2000)
	var recs [][]byte
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		recs, _ = Split(body, false, DefaultLimits(), recs[:0])
	}
	b.ReportMetric(float64(b.N)*2000/b.Elapsed().Seconds(), "records/s")
}
