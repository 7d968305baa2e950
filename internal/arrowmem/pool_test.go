package arrowmem

import (
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestPoolReuse: freed buffers come back, zeroed and 64-byte aligned, in
// the smallest class that holds the size; odd buffers are not kept.
func TestPoolReuse(t *testing.T) {
	var p Pool
	for _, size := range []int{0, 1, 63, 64, 65, 1000, 4096, 70_000, 3 << 20} {
		b := p.Allocate(size)
		if len(b) != size || cap(b) < size || cap(b)&(cap(b)-1) != 0 || cap(b) < 64 {
			t.Fatalf("Allocate(%d): len %d cap %d", size, len(b), cap(b))
		}
		if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%64 != 0 {
			t.Fatalf("Allocate(%d) not 64-byte aligned", size)
		}
		for i := range b {
			b[i] = 0xff
		}
		p.Free(b)
		again := p.Allocate(size)
		if unsafe.SliceData(again) != unsafe.SliceData(b) {
			t.Fatalf("Allocate(%d) after Free: a new buffer", size)
		}
		for i, c := range again {
			if c != 0 {
				t.Fatalf("Allocate(%d) after Free: byte %d is %#x", size, i, c)
			}
		}
	}
	odd := make([]byte, 100)
	p.Free(odd)
	if b := p.Allocate(100); unsafe.SliceData(b) == unsafe.SliceData(odd) {
		t.Fatal("a buffer not from the pool was handed out")
	}
	grown := p.Reallocate(5000, append(p.Allocate(10)[:0], "abc"...))
	if string(grown[:3]) != "abc" || len(grown) != 5000 || grown[3] != 0 || grown[4999] != 0 {
		t.Fatalf("Reallocate: %q… len %d", grown[:4], len(grown))
	}
}

// TestPoolBuilders: record batches built one after another on recycled
// buffers hold exactly what was appended (nulls included), as on Go's
// allocator.
func TestPoolBuilders(t *testing.T) {
	var p Pool
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(&p, schema)
	defer rb.Release()
	for batch := range 5 {
		n := 1000 + batch*300
		s, in := rb.Field(0).(*array.StringBuilder), rb.Field(1).(*array.Int64Builder)
		for i := range n {
			if (i+batch)%7 == 0 {
				s.AppendNull()
				in.AppendNull()
				continue
			}
			s.Append(string(rune('a' + (i+batch)%26)))
			in.Append(int64(i * batch))
		}
		rec := rb.NewRecordBatch()
		ss, is := rec.Column(0).(*array.String), rec.Column(1).(*array.Int64)
		for i := range n {
			null := (i+batch)%7 == 0
			if ss.IsNull(i) != null || is.IsNull(i) != null {
				t.Fatalf("batch %d row %d: null %v/%v, want %v", batch, i, ss.IsNull(i), is.IsNull(i), null)
			}
			if !null && (ss.Value(i) != string(rune('a'+(i+batch)%26)) || is.Value(i) != int64(i*batch)) {
				t.Fatalf("batch %d row %d: %q %d", batch, i, ss.Value(i), is.Value(i))
			}
		}
		rec.Release()
	}
}
