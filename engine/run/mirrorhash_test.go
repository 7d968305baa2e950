package run

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestDecimalText: the row hash's fast text of a decimal is arrow's
// ValueStr byte for byte (a difference would make every stored row look
// changed), for every precision and scale it covers and values of every
// length, sign and trailing zeros, down to the exponent form of tiny
// values.
func TestDecimalText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pow10 := func(n int) int64 {
		v := int64(1)
		for range n {
			v *= 10
		}
		return v
	}
	checked := 0
	for prec := 1; prec <= 18; prec++ {
		for scale := 0; scale <= prec; scale++ {
			typ := &arrow.Decimal128Type{Precision: int32(prec), Scale: int32(scale)}
			b := array.NewDecimal128Builder(memory.DefaultAllocator, typ)
			vals := []int64{0, 1, -1, pow10(prec) - 1, -(pow10(prec) - 1)}
			for n := 1; n <= prec; n++ {
				vals = append(vals, pow10(n-1), -pow10(n-1), pow10(n-1)*7, 5*pow10(n-1)+3)
			}
			for range 300 {
				v := rng.Int64N(pow10(rng.IntN(prec) + 1))
				if rng.IntN(2) == 0 {
					v = -v
				}
				vals = append(vals, v)
			}
			for _, v := range vals {
				b.Append(decimal128.FromI64(v))
			}
			arr := b.NewDecimal128Array()
			b.Release()
			for i, v := range vals {
				want := arr.ValueStr(i)
				text, ok := appendDecimalG(nil, arr.Value(i), typ)
				if got := string(text); !ok || got != want {
					t.Fatalf("decimal(%d,%d) unscaled %d: %q (ok %v), want %q", prec, scale, v, got, ok, want)
				}
				checked++
			}
			arr.Release()
		}
	}
	if _, ok := appendDecimalG(nil, decimal128.FromI64(1), &arrow.Decimal128Type{Precision: 38, Scale: 2}); ok {
		t.Fatal("decimal(38,2) took the fast text; it is only exact up to 18 digits")
	}
	t.Logf("%d values checked", checked)
}
