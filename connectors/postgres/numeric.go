package postgres

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// numeric is PostgreSQL's binary numeric: base-10000 digits, the weight
// (power of 10000) of the first, a sign word and the display scale.
type numeric struct {
	ndigits int
	weight  int
	sign    uint16
	dscale  int
	digits  []byte // ndigits big-endian uint16s
}

const (
	numPos  = 0x0000
	numNeg  = 0x4000
	numNaN  = 0xC000
	numPInf = 0xD000 // PostgreSQL 14+, unconstrained numeric only
	numNInf = 0xF000
)

var errNumeric = errors.New("malformed numeric")

func parseNumeric(v []byte) (numeric, error) {
	if len(v) < 8 {
		return numeric{}, errNumeric
	}
	n := numeric{
		ndigits: int(int16(binary.BigEndian.Uint16(v))),
		weight:  int(int16(binary.BigEndian.Uint16(v[2:]))),
		sign:    binary.BigEndian.Uint16(v[4:]),
		dscale:  int(binary.BigEndian.Uint16(v[6:])),
		digits:  v[8:],
	}
	if n.ndigits < 0 || len(n.digits) != 2*n.ndigits {
		return numeric{}, errNumeric
	}
	switch n.sign {
	case numPos, numNeg, numNaN, numPInf, numNInf:
	default:
		return numeric{}, errNumeric
	}
	return n, nil
}

// special reports NaN and ±Infinity, which have no digits.
func (n numeric) special() bool { return n.sign != numPos && n.sign != numNeg }

func (n numeric) digit(i int) uint64 {
	if i < 0 || i >= n.ndigits {
		return 0
	}
	return uint64(binary.BigEndian.Uint16(n.digits[2*i:]))
}

// appendText renders n as PostgreSQL's numeric_out does: all integer
// digits, then exactly dscale fraction digits; NaN and ±Infinity by name.
func (n numeric) appendText(dst []byte) []byte {
	switch n.sign {
	case numNaN:
		return append(dst, "NaN"...)
	case numPInf:
		return append(dst, "Infinity"...)
	case numNInf:
		return append(dst, "-Infinity"...)
	case numNeg:
		if n.ndigits > 0 { // zero is never negative
			dst = append(dst, '-')
		}
	}
	if n.weight < 0 {
		dst = append(dst, '0')
	}
	for d := 0; d <= n.weight; d++ {
		if d == 0 {
			dst = strconv.AppendUint(dst, n.digit(d), 10)
		} else {
			dst = append4(dst, n.digit(d), 4)
		}
	}
	if n.dscale > 0 {
		dst = append(dst, '.')
		for d, left := n.weight+1, n.dscale; left > 0; d, left = d+1, left-4 {
			dst = append4(dst, n.digit(d), min(left, 4))
		}
	}
	return dst
}

// append4 appends the first k of the four decimal digits of d.
func append4(dst []byte, d uint64, k int) []byte {
	var b [4]byte
	for i := 3; i >= 0; i-- {
		b[i] = byte('0' + d%10)
		d /= 10
	}
	return append(dst, b[:k]...)
}

var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

var errScale = errors.New("numeric value has more fraction digits than its column's scale")

// decimal returns n as an unscaled decimal128 at scale. The caller has
// checked that the column's precision is at most 38, so the value fits;
// the overflow check only guards against a malformed message.
func (n numeric) decimal(scale int32) (decimal128.Num, error) {
	var acc u128
	minExp := -int(scale) // the lowest power of ten the result keeps
	low := minExp         // power of ten of acc's last digit
	for i := 0; i < n.ndigits; i++ {
		d := n.digit(i)
		e := 4 * (n.weight - i) // power of ten of this group's last digit
		if e >= minExp {
			acc.mulAdd(10000, d)
			low = e
			continue
		}
		keep := e + 4 - minExp // digits of this group above the scale
		if keep <= 0 {
			if d != 0 {
				return decimal128.Num{}, errScale
			}
			continue
		}
		div := pow10[4-keep]
		if d%div != 0 {
			return decimal128.Num{}, errScale
		}
		acc.mulAdd(pow10[keep], d/div)
		low = minExp
	}
	for shift := low - minExp; shift > 0; shift -= 18 {
		acc.mulAdd(pow10[min(shift, 18)], 0)
	}
	if acc.overflow || acc.hi>>63 != 0 {
		return decimal128.Num{}, errNumeric
	}
	num := decimal128.New(int64(acc.hi), acc.lo)
	if n.sign == numNeg {
		num = num.Negate()
	}
	return num, nil
}

// u128 is an unsigned 128-bit accumulator that remembers overflow.
type u128 struct {
	hi, lo   uint64
	overflow bool
}

// mulAdd sets u to u*m + a.
func (u *u128) mulAdd(m, a uint64) {
	if u.hi == 0 {
		h, l := bits.Mul64(u.lo, m)
		var c uint64
		u.lo, c = bits.Add64(l, a, 0)
		u.hi = h + c
		return
	}
	h, l := bits.Mul64(u.lo, m)
	hh, hl := bits.Mul64(u.hi, m)
	var c, c2 uint64
	u.lo, c = bits.Add64(l, a, 0)
	u.hi, c2 = bits.Add64(hl, h, c)
	u.overflow = u.overflow || hh != 0 || c2 != 0
}
