package snowflake

import (
	"database/sql/driver"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// column is one result column as the query response's rowtype describes
// it, and the Arrow type it is read as.
type column struct {
	name             string
	sfType           string // FIXED, REAL, TEXT, TIMESTAMP_NTZ, …
	precision, scale int64
	nullable         bool
	typ              arrow.DataType
}

var (
	timestampType   = &arrow.TimestampType{Unit: arrow.Microsecond}
	timestamptzType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
)

// columnsOf reads the rowtype of a result through database/sql's column
// type interfaces, which gosnowflake's rows implement.
func columnsOf(rows driver.Rows) ([]column, error) {
	tn, ok1 := rows.(driver.RowsColumnTypeDatabaseTypeName)
	ps, ok2 := rows.(driver.RowsColumnTypePrecisionScale)
	nl, ok3 := rows.(driver.RowsColumnTypeNullable)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("driver rows %T do not describe their columns", rows)
	}
	names := rows.Columns()
	cols := make([]column, len(names))
	for i, n := range names {
		c := column{name: n, sfType: tn.ColumnTypeDatabaseTypeName(i)}
		c.precision, c.scale, _ = ps.ColumnTypePrecisionScale(i)
		c.nullable, _ = nl.ColumnTypeNullable(i)
		c.typ = arrowType(c)
		cols[i] = c
	}
	return cols, nil
}

func arrowType(c column) arrow.DataType {
	switch c.sfType {
	case "FIXED":
		if c.scale == 0 {
			return arrow.PrimitiveTypes.Int64
		}
		return &arrow.Decimal128Type{Precision: int32(c.precision), Scale: int32(c.scale)}
	case "REAL":
		return arrow.PrimitiveTypes.Float64
	case "BOOLEAN":
		return arrow.FixedWidthTypes.Boolean
	case "DATE":
		return arrow.FixedWidthTypes.Date32
	case "TIME":
		return arrow.FixedWidthTypes.Time64ns
	case "TIMESTAMP_NTZ":
		return timestampType
	case "TIMESTAMP_LTZ", "TIMESTAMP_TZ":
		return timestamptzType
	case "BINARY":
		return arrow.BinaryTypes.Binary
	}
	// TEXT, and VARIANT, OBJECT, ARRAY, GEOGRAPHY, DECFLOAT, which the
	// driver leaves as Snowflake's text rendering (JSON for the first
	// three).
	return arrow.BinaryTypes.String
}

// sourceType names a result column's type the way DDL spells it.
func (c column) sourceType() string {
	switch c.sfType {
	case "FIXED":
		return fmt.Sprintf("NUMBER(%d,%d)", c.precision, c.scale)
	case "TEXT":
		return "VARCHAR"
	case "REAL":
		return "FLOAT"
	}
	return c.sfType
}

func schemaOf(cols []column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.nullable}
	}
	return arrow.NewSchema(fields, nil)
}

// convert turns one record of the driver's raw batch into the
// connector's Arrow types, column by column; arrays already in the right
// type are shared, not copied.
func convert(schema *arrow.Schema, cols []column, raw arrow.RecordBatch) (arrow.RecordBatch, error) {
	if int(raw.NumCols()) != len(cols) {
		return nil, fmt.Errorf("batch of %d columns for %d", raw.NumCols(), len(cols))
	}
	out := make([]arrow.Array, len(cols))
	defer func() {
		for _, a := range out {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, c := range cols {
		a, err := convertColumn(c, raw.Schema().Field(i), raw.Column(i))
		if err != nil {
			return nil, fmt.Errorf("column %s (%s as %s): %w", c.name, c.sfType, raw.Column(i).DataType(), err)
		}
		out[i] = a
	}
	return array.NewRecordBatch(schema, out, raw.NumRows()), nil
}

func convertColumn(c column, f arrow.Field, a arrow.Array) (arrow.Array, error) {
	if arrow.TypeEqual(a.DataType(), c.typ) {
		a.Retain()
		return a, nil
	}
	switch c.sfType {
	case "FIXED":
		if c.scale == 0 {
			return toInt64(a)
		}
		return toDecimal(a, c.typ.(*arrow.Decimal128Type))
	case "TIME":
		// The driver has cast Snowflake's scaled integers to time64[ns]
		// without rescaling them.
		scale, err := fieldScale(f)
		if err != nil || a.DataType().ID() != arrow.TIME64 {
			return nil, fmt.Errorf("unexpected TIME encoding (%v)", err)
		}
		vals := a.(*array.Time64).Values()
		out := make([]int64, len(vals))
		for i, v := range vals {
			out[i] = int64(v) * pow10[9-scale]
		}
		return fromInt64s(c.typ, a, out), nil
	case "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ":
		scale, err := fieldScale(f)
		if err != nil {
			return nil, err
		}
		return toMicros(c.typ, a, scale)
	}
	if c.typ.ID() == arrow.STRING {
		if s, ok := a.(interface{ ValueStr(int) string }); ok && a.DataType().ID() != arrow.STRING {
			b := array.NewStringBuilder(memory.DefaultAllocator)
			defer b.Release()
			for i := 0; i < a.Len(); i++ {
				if a.IsNull(i) {
					b.AppendNull()
				} else {
					b.Append(s.ValueStr(i))
				}
			}
			return b.NewArray(), nil
		}
	}
	return nil, fmt.Errorf("no conversion to %s", c.typ)
}

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return
}()

// fieldScale reads the fractional-second digits Snowflake records in each
// field's metadata; they tell how to read scaled timestamps.
func fieldScale(f arrow.Field) (int, error) {
	v, ok := f.Metadata.GetValue("scale")
	if !ok {
		return 0, fmt.Errorf("no scale in the field metadata")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 9 {
		return 0, fmt.Errorf("bad scale %q in the field metadata", v)
	}
	return n, nil
}

// toInt64 widens Snowflake's narrowest-integer encoding of NUMBER(p,0).
func toInt64(a arrow.Array) (arrow.Array, error) {
	out := make([]int64, a.Len())
	switch x := a.(type) {
	case *array.Int8:
		for i, v := range x.Int8Values() {
			out[i] = int64(v)
		}
	case *array.Int16:
		for i, v := range x.Int16Values() {
			out[i] = int64(v)
		}
	case *array.Int32:
		for i, v := range x.Int32Values() {
			out[i] = int64(v)
		}
	case *array.Decimal128:
		for i, v := range x.Values() {
			lo := int64(v.LowBits())
			if x.IsValid(i) && !((v.HighBits() == 0 && lo >= 0) || (v.HighBits() == -1 && lo < 0)) {
				return nil, fmt.Errorf("value %s does not fit int64; cast the column to VARCHAR or NUMBER with a scale in a query", v.ToString(0))
			}
			out[i] = lo
		}
	default:
		return nil, fmt.Errorf("unexpected NUMBER encoding")
	}
	return fromInt64s(arrow.PrimitiveTypes.Int64, a, out), nil
}

// toDecimal gives NUMBER(p,s)'s scaled integers their decimal type.
func toDecimal(a arrow.Array, dt *arrow.Decimal128Type) (arrow.Array, error) {
	if a.DataType().ID() == arrow.DECIMAL128 {
		d := a.Data()
		nd := array.NewData(dt, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
		defer nd.Release()
		return array.MakeFromData(nd), nil
	}
	var get func(i int) int64
	switch x := a.(type) {
	case *array.Int8:
		get = func(i int) int64 { return int64(x.Value(i)) }
	case *array.Int16:
		get = func(i int) int64 { return int64(x.Value(i)) }
	case *array.Int32:
		get = func(i int) int64 { return int64(x.Value(i)) }
	case *array.Int64:
		get = x.Value
	default:
		return nil, fmt.Errorf("unexpected NUMBER encoding")
	}
	out := make([]decimal128.Num, a.Len())
	for i := range out {
		out[i] = decimal128.FromI64(get(i))
	}
	return fromBytes(dt, a, arrow.Decimal128Traits.CastToBytes(out)), nil
}

// toMicros reads the three timestamp encodings: an int64 in units of
// 10^-scale s, struct{epoch s, fraction ns[, timezone]}, and for
// TIMESTAMP_TZ at scale ≤ 3 struct{scaled epoch, timezone}. The epoch is
// UTC in all of them, so the timezone field is not needed for the instant.
func toMicros(dt arrow.DataType, a arrow.Array, scale int) (arrow.Array, error) {
	out := make([]int64, a.Len())
	switch x := a.(type) {
	case *array.Int64:
		for i, v := range x.Int64Values() {
			out[i] = scaledToMicros(v, scale)
		}
	case *array.Struct:
		epoch, ok := x.Field(0).(*array.Int64)
		if !ok {
			return nil, fmt.Errorf("unexpected timestamp encoding")
		}
		ev := epoch.Int64Values()
		// TIMESTAMP_TZ at scale ≤ 3 is struct{scaled epoch, timezone};
		// otherwise the second field is the nanosecond fraction.
		fraction, ok := x.Field(1).(*array.Int32)
		if !ok {
			return nil, fmt.Errorf("unexpected timestamp encoding")
		}
		if x.NumField() == 2 && scale <= 3 {
			for i, v := range ev {
				out[i] = scaledToMicros(v, scale)
			}
			break
		}
		fv := fraction.Int32Values()
		for i, v := range ev {
			out[i] = v*1_000_000 + int64(fv[i])/1000
		}
	default:
		return nil, fmt.Errorf("unexpected timestamp encoding")
	}
	return fromInt64s(dt, a, out), nil
}

func scaledToMicros(v int64, scale int) int64 {
	if scale <= 6 {
		return v * pow10[6-scale]
	}
	d := pow10[scale-6]
	q := v / d
	if v%d < 0 {
		q-- // floor: 1969-12-31 23:59:59.9999999 is before the epoch
	}
	return q
}

func fromInt64s(dt arrow.DataType, like arrow.Array, vals []int64) arrow.Array {
	return fromBytes(dt, like, arrow.Int64Traits.CastToBytes(vals))
}

// fromBytes builds an array of dt over values, with like's validity.
func fromBytes(dt arrow.DataType, like arrow.Array, values []byte) arrow.Array {
	buf := memory.NewBufferBytes(values)
	defer buf.Release()
	valid := validity(like)
	if valid != nil {
		defer valid.Release()
	}
	d := array.NewData(dt, like.Len(), []*memory.Buffer{valid, buf}, nil, like.NullN(), 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// validity returns like's null bitmap starting at bit 0 (nil when there
// are no nulls); the caller releases it.
func validity(like arrow.Array) *memory.Buffer {
	if like.NullN() == 0 {
		return nil
	}
	d := like.Data()
	src := d.Buffers()[0]
	if d.Offset() == 0 {
		src.Retain()
		return src
	}
	out := make([]byte, bitutil.BytesForBits(int64(d.Len())))
	bitutil.CopyBitmap(src.Bytes(), d.Offset(), d.Len(), out, 0)
	return memory.NewBufferBytes(out)
}
