package run

import (
	"encoding/binary"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
	}
	// Decimals, nested and extension types: their text form is exact.
	return str('v', arr.ValueStr(i))
}
