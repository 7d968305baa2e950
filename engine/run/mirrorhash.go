package run

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/zeebo/xxh3"
)

// rowHasher encodes a row's key and hashes the row for a Mirror sync.
// Each cell is a type tag and its value, so values of different types
// never encode alike; NULL is the tag 0 alone. The row hash leaves out
// trailing NULL cells: a nullable column added at the end of a table
// changes no existing row's hash (as Mixpanel documents for Mirror).
type rowHasher struct {
	key []int // column indexes of the key; nil: the whole row is the key
	buf []byte
}

// keyOf appends row i's key to dst.
func (h *rowHasher) keyOf(dst []byte, rec arrow.RecordBatch, i int) []byte {
	if h.key == nil {
		sum := h.hash(rec, i)
		return append(dst, sum[:]...)
	}
	for _, c := range h.key {
		dst = appendCell(dst, rec.Column(c), i)
	}
	return dst
}

// hash returns row i's hash.
func (h *rowHasher) hash(rec arrow.RecordBatch, i int) [16]byte {
	b, end := h.buf[:0], 0
	for c := range int(rec.NumCols()) {
		b = appendCell(b, rec.Column(c), i)
		if rec.Column(c).IsValid(i) {
			end = len(b)
		}
	}
	h.buf = b
	return xxh3.Hash128(b[:end]).Bytes()
}

// appendCell appends the tagged value of arr[i].
func appendCell(dst []byte, arr arrow.Array, i int) []byte {
	if arr.IsNull(i) {
		return append(dst, 0)
	}
	i64 := func(tag byte, v int64) []byte {
		return binary.BigEndian.AppendUint64(append(dst, tag), uint64(v))
	}
	str := func(tag byte, s string) []byte {
		dst = binary.AppendUvarint(append(dst, tag), uint64(len(s)))
		return append(dst, s...)
	}
	switch a := arr.(type) {
	case *array.Int8:
		return i64('i', int64(a.Value(i)))
	case *array.Int16:
		return i64('i', int64(a.Value(i)))
	case *array.Int32:
		return i64('i', int64(a.Value(i)))
	case *array.Int64:
		return i64('i', a.Value(i))
	case *array.Uint8:
		return i64('i', int64(a.Value(i)))
	case *array.Uint16:
		return i64('i', int64(a.Value(i)))
	case *array.Uint32:
		return i64('i', int64(a.Value(i)))
	case *array.Uint64:
		return i64('u', int64(a.Value(i)))
	case *array.Float32:
		return i64('f', int64(math.Float64bits(float64(a.Value(i)))))
	case *array.Float64:
		return i64('f', int64(math.Float64bits(a.Value(i))))
	case *array.Boolean:
		if a.Value(i) {
			return append(dst, 'T')
		}
		return append(dst, 'F')
	case *array.String:
		return str('s', a.Value(i))
	case *array.LargeString:
		return str('s', a.Value(i))
	case *array.StringView:
		return str('s', a.Value(i))
	case *array.Binary:
		dst = binary.AppendUvarint(append(dst, 'b'), uint64(len(a.Value(i))))
		return append(dst, a.Value(i)...)
	case *array.LargeBinary:
		dst = binary.AppendUvarint(append(dst, 'b'), uint64(len(a.Value(i))))
		return append(dst, a.Value(i)...)
	case *array.Timestamp:
		return i64(byte('0'+a.DataType().(*arrow.TimestampType).Unit), int64(a.Value(i)))
	case *array.Date32:
		return i64('d', int64(a.Value(i))*86400)
	case *array.Date64:
		return i64('d', int64(a.Value(i))/1000)
	case *array.Decimal128:
		// The text form below, without math/big (the hash's costliest
		// step on a table with a numeric column).
		var buf [48]byte
		if text, ok := appendDecimalG(buf[:0], a.Value(i), a.DataType().(*arrow.Decimal128Type)); ok {
			dst = binary.AppendUvarint(append(dst, 'v'), uint64(len(text)))
			return append(dst, text...)
		}
	}
	// Decimals, nested and extension types: their text form is exact.
	return str('v', arr.ValueStr(i))
}

// appendDecimalG appends n as arrow's Decimal128 ValueStr writes it,
// big.Float's Text('g', precision), when t's precision is at most 18 and
// its scale not negative: then the value has at most precision digits and
// the text is exact (TestDecimalText compares the two). ok is false for
// other types, which take ValueStr.
func appendDecimalG(dst []byte, n decimal128.Num, t *arrow.Decimal128Type) (_ []byte, ok bool) {
	if t.Precision > 18 || t.Scale < 0 || !n.FitsInPrecision(18) {
		return dst, false
	}
	scale, prec := t.Scale, int(t.Precision)
	neg, u := n.Sign() < 0, n.LowBits()
	if neg {
		u = -u // two's complement magnitude: |n| < 10^18
	}
	if u == 0 {
		return append(dst, '0'), true
	}
	if neg {
		dst = append(dst, '-')
	}
	var digits [20]byte
	mant := strconv.AppendUint(digits[:0], u, 10)
	dexp := len(mant) - int(scale) // digits before the decimal point
	for len(mant) > 1 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
	}
	at := func(i int) byte {
		if i >= 0 && i < len(mant) {
			return mant[i]
		}
		return '0'
	}
	eprec := prec
	if eprec > len(mant) && len(mant) >= dexp {
		eprec = len(mant)
	}
	if exp := dexp - 1; exp < -4 || exp >= eprec {
		p := min(prec, len(mant))
		dst = append(dst, mant[0])
		if p > 1 {
			dst = append(dst, '.')
			dst = append(dst, mant[1:p]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst, exp = append(dst, '-'), -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10), true
	}
	if prec > dexp {
		prec = len(mant)
	}
	if dexp > 0 {
		for j := range dexp {
			dst = append(dst, at(j))
		}
	} else {
		dst = append(dst, '0')
	}
	if frac := prec - dexp; frac > 0 {
		dst = append(dst, '.')
		for j := range frac {
			dst = append(dst, at(dexp+j))
		}
	}
	return dst, true
}
