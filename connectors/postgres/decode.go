package postgres

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// appender decodes one wire value (nil is SQL NULL) onto a builder. One is
// bound per column and read, to the column's concrete builder, so the row
// loop does no type switch or interface assertion per value.
type appender func(v []byte) error

const (
	// PostgreSQL counts timestamps and dates from 2000-01-01, Arrow from 1970.
	pgEpochMicros = 946_684_800 * 1_000_000
	pgEpochDays   = 10_957
)

func badLen(c *column, n int) error {
	return fmt.Errorf("column %s: unexpected %d-byte binary value for type oid %d", c.name, n, c.oid)
}

// bind returns the appender of column c onto b (a builder of c.typ).
func bind(c *column, b array.Builder) appender {
	switch c.kind {
	case kInt16:
		ib := b.(*array.Int16Builder)
		return fixed(c, 2, ib.AppendNull, func(v []byte) { ib.Append(int16(binary.BigEndian.Uint16(v))) })
	case kInt32:
		ib := b.(*array.Int32Builder)
		return fixed(c, 4, ib.AppendNull, func(v []byte) { ib.Append(int32(binary.BigEndian.Uint32(v))) })
	case kInt64:
		ib := b.(*array.Int64Builder)
		return fixed(c, 8, ib.AppendNull, func(v []byte) { ib.Append(int64(binary.BigEndian.Uint64(v))) })
	case kFloat32:
		fb := b.(*array.Float32Builder)
		return fixed(c, 4, fb.AppendNull, func(v []byte) { fb.Append(math.Float32frombits(binary.BigEndian.Uint32(v))) })
	case kFloat64:
		fb := b.(*array.Float64Builder)
		return fixed(c, 8, fb.AppendNull, func(v []byte) { fb.Append(math.Float64frombits(binary.BigEndian.Uint64(v))) })
	case kBool:
		bb := b.(*array.BooleanBuilder)
		return fixed(c, 1, bb.AppendNull, func(v []byte) { bb.Append(v[0] != 0) })
	case kTimestamp:
		return bindTimestamp(c, b.(*array.TimestampBuilder))
	case kDate:
		return bindDate(c, b.(*array.Date32Builder))
	case kText:
		sb := b.(*array.StringBuilder)
		return func(v []byte) error {
			if v == nil {
				sb.AppendNull()
			} else {
				sb.BinaryBuilder.Append(v)
			}
			return nil
		}
	case kBytea:
		bb := b.(*array.BinaryBuilder)
		return func(v []byte) error {
			if v == nil {
				bb.AppendNull()
			} else {
				bb.Append(v)
			}
			return nil
		}
	case kJSONB:
		return bindJSONB(c, b.(*array.StringBuilder))
	case kUUID:
		return bindUUID(c, b.(*array.StringBuilder))
	case kDecimal:
		return bindDecimal(c, b.(*array.Decimal128Builder))
	case kNumericText:
		return bindNumericText(c, b.(*array.StringBuilder))
	case kList:
		return bindList(c, b.(*array.ListBuilder))
	}
	panic(fmt.Sprintf("postgres: no decoder for kind %d", c.kind))
}

// fixed wraps a decoder of fixed-width values with the NULL and length
// checks they all need.
func fixed(c *column, width int, appendNull func(), put func([]byte)) appender {
	return func(v []byte) error {
		if v == nil {
			appendNull()
			return nil
		}
		if len(v) != width {
			return badLen(c, len(v))
		}
		put(v)
		return nil
	}
}

// bindTimestamp reads microseconds since 2000. ±infinity become NULL: no
// instant represents them, and a clamp to an arbitrary far date would be
// taken for real data downstream. So do the rare values near the end of
// PostgreSQL's range (after 294247-01-10) that overflow Arrow's 1970-based
// int64 microseconds.
func bindTimestamp(c *column, tb *array.TimestampBuilder) appender {
	return func(v []byte) error {
		if v == nil {
			tb.AppendNull()
			return nil
		}
		if len(v) != 8 {
			return badLen(c, len(v))
		}
		us := int64(binary.BigEndian.Uint64(v))
		if us == math.MaxInt64 || us == math.MinInt64 || us > math.MaxInt64-pgEpochMicros {
			tb.AppendNull()
			return nil
		}
		tb.Append(arrow.Timestamp(us + pgEpochMicros))
		return nil
	}
}

// bindDate reads days since 2000; ±infinity become NULL, as timestamps do.
func bindDate(c *column, db *array.Date32Builder) appender {
	return func(v []byte) error {
		if v == nil {
			db.AppendNull()
			return nil
		}
		if len(v) != 4 {
			return badLen(c, len(v))
		}
		d := int64(int32(binary.BigEndian.Uint32(v)))
		if d == math.MaxInt32 || d == math.MinInt32 || d+pgEpochDays > math.MaxInt32 {
			db.AppendNull()
			return nil
		}
		db.Append(arrow.Date32(d + pgEpochDays))
		return nil
	}
}

// bindJSONB strips jsonb's format version byte; what follows is JSON text.
func bindJSONB(c *column, sb *array.StringBuilder) appender {
	return func(v []byte) error {
		if v == nil {
			sb.AppendNull()
			return nil
		}
		if len(v) < 1 || v[0] != 1 {
			return fmt.Errorf("column %s: unknown jsonb format version", c.name)
		}
		sb.BinaryBuilder.Append(v[1:])
		return nil
	}
}

func bindUUID(c *column, sb *array.StringBuilder) appender {
	const hexDigits = "0123456789abcdef"
	var buf [36]byte
	return func(v []byte) error {
		if v == nil {
			sb.AppendNull()
			return nil
		}
		if len(v) != 16 {
			return badLen(c, len(v))
		}
		j := 0
		for i, x := range v {
			if i == 4 || i == 6 || i == 8 || i == 10 {
				buf[j] = '-'
				j++
			}
			buf[j], buf[j+1] = hexDigits[x>>4], hexDigits[x&0xf]
			j += 2
		}
		sb.BinaryBuilder.Append(buf[:])
		return nil
	}
}

// bindDecimal reads numeric(p,s) into decimal128(p,s). NaN, which such a
// column may hold, becomes NULL.
func bindDecimal(c *column, db *array.Decimal128Builder) appender {
	return func(v []byte) error {
		if v == nil {
			db.AppendNull()
			return nil
		}
		n, err := parseNumeric(v)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
		if n.special() {
			db.AppendNull()
			return nil
		}
		num, err := n.decimal(c.scale)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
		db.Append(num)
		return nil
	}
}

// bindNumericText renders unconstrained numeric as PostgreSQL's text, so
// no digit is lost; NaN and ±Infinity keep their names.
func bindNumericText(c *column, sb *array.StringBuilder) appender {
	buf := make([]byte, 0, 64)
	return func(v []byte) error {
		if v == nil {
			sb.AppendNull()
			return nil
		}
		n, err := parseNumeric(v)
		if err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
		buf = n.appendText(buf[:0])
		sb.BinaryBuilder.Append(buf)
		return nil
	}
}

// bindList reads a binary array into a list. Multi-dimensional arrays are
// flattened in row-major order (Arrow's list has no shape); element NULLs
// are kept.
func bindList(c *column, lb *array.ListBuilder) appender {
	elem := bind(c.elem, lb.ValueBuilder())
	return func(v []byte) error {
		if v == nil {
			lb.AppendNull()
			return nil
		}
		if len(v) < 12 {
			return badLen(c, len(v))
		}
		ndim := int(int32(binary.BigEndian.Uint32(v)))
		if ndim < 0 || ndim > 6 || len(v) < 12+8*ndim {
			return badLen(c, len(v))
		}
		if oid := binary.BigEndian.Uint32(v[8:]); ndim > 0 && oid != c.elem.oid {
			return fmt.Errorf("column %s: array element oid %d, expected %d", c.name, oid, c.elem.oid)
		}
		n := 0
		if ndim > 0 {
			n = 1
		}
		for d := 0; d < ndim; d++ {
			size := int(int32(binary.BigEndian.Uint32(v[12+8*d:])))
			if size < 0 || size > len(v) {
				return badLen(c, len(v))
			}
			n *= size
		}
		lb.Append(true)
		p := 12 + 8*ndim
		for k := 0; k < n; k++ {
			if len(v) < p+4 {
				return badLen(c, len(v))
			}
			l := int(int32(binary.BigEndian.Uint32(v[p:])))
			p += 4
			if l < 0 {
				if err := elem(nil); err != nil {
					return err
				}
				continue
			}
			if len(v) < p+l {
				return badLen(c, len(v))
			}
			if err := elem(v[p : p+l : p+l]); err != nil {
				return err
			}
			p += l
		}
		return nil
	}
}
