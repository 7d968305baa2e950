package mapping

import (
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// digitPairs holds "00" to "99".
var digitPairs = func() (t [200]byte) {
	for n := range 100 {
		t[2*n], t[2*n+1] = byte('0'+n/10), byte('0'+n%10)
	}
	return t
}()

var pow10 = func() (t [20]uint64) {
	t[0] = 1
	for k := 1; k < len(t); k++ {
		t[k] = t[k-1] * 10
	}
	return t
}()

// appendInt is strconv.AppendInt(dst, x, 10), writing the digits in
// place instead of through a buffer and a copy.
func appendInt(dst []byte, x int64) []byte {
	if x < 0 {
		return appendUint(append(dst, '-'), uint64(-x))
	}
	return appendUint(dst, uint64(x))
}

func appendUint(dst []byte, u uint64) []byte {
	n := (bits.Len64(u) * 1233) >> 12 // log10, maybe one short
	if n < len(pow10) && u >= pow10[n] {
		n++
	}
	if n == 0 {
		n = 1
	}
	l := len(dst)
	if cap(dst)-l < n {
		dst = append(dst, make([]byte, n)...)[:l]
	}
	dst = dst[:l+n]
	b := dst[l:]
	// Eight digits at a time in 32-bit arithmetic, which is cheaper.
	for u >= 1e8 {
		q := u / 1e8
		put8(b[n-8:n], uint32(u-q*1e8))
		n -= 8
		u = q
	}
	r := uint32(u)
	for r >= 100 {
		q := r / 100
		d := 2 * (r - q*100)
		n -= 2
		b[n], b[n+1] = digitPairs[d], digitPairs[d+1]
		r = q
	}
	if r >= 10 {
		b[0], b[1] = digitPairs[2*r], digitPairs[2*r+1]
	} else {
		b[0] = byte('0' + r)
	}
	return dst
}

// put8 writes r (below 1e8) as exactly eight digits.
func put8(b []byte, r uint32) {
	_ = b[7]
	for k := 6; k >= 0; k -= 2 {
		q := r / 100
		d := 2 * (r - q*100)
		b[k], b[k+1] = digitPairs[d], digitPairs[d+1]
		r = q
	}
}

// appendDecimal writes a decimal as a JSON number; values that fit an
// int64 take the allocation-free path.
func appendDecimal(dst []byte, n decimal128.Num, scale int32) []byte {
	hi, lo := n.HighBits(), n.LowBits()
	if (hi == 0 && lo < 1<<63) || (hi == -1 && lo >= 1<<63) {
		x := int64(lo)
		if scale <= 0 {
			dst = appendInt(dst, x)
			for ; scale < 0; scale++ {
				dst = append(dst, '0')
			}
			return dst
		}
		u := uint64(x)
		if x < 0 {
			dst = append(dst, '-')
			u = uint64(-x)
		}
		var buf [24]byte
		digits := appendUint(buf[:0], u)
		if len(digits) <= int(scale) { // 0.00ddd
			dst = append(dst, '0', '.')
			for k := len(digits); k < int(scale); k++ {
				dst = append(dst, '0')
			}
			return append(dst, digits...)
		}
		cut := len(digits) - int(scale)
		dst = append(dst, digits[:cut]...)
		dst = append(dst, '.')
		return append(dst, digits[cut:]...)
	}
	return append(dst, n.ToString(scale)...)
}
