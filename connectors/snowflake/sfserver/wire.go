package sfserver

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// resultCol is one column of a result: its rowtype and nullability.
type resultCol struct {
	name     string
	t        sfType
	nullable bool
	table    *table // the column's table, when it is a plain column
}

func (c resultCol) rowType() map[string]any {
	rt := map[string]any{"name": c.name, "type": c.t.name, "nullable": c.nullable,
		"precision": nil, "scale": nil, "length": nil, "byteLength": nil, "collation": nil}
	switch c.t.name {
	case "fixed":
		rt["precision"], rt["scale"] = c.t.precision, c.t.scale
	case "time", "timestamp_ntz", "timestamp_ltz", "timestamp_tz":
		rt["precision"], rt["scale"] = 0, c.t.scale
	case "text", "variant", "object", "array":
		n := max(c.t.precision, 16777216)
		rt["length"], rt["byteLength"] = n, 4*n
	case "binary":
		rt["length"], rt["byteLength"] = c.t.precision, c.t.precision
	}
	if c.table != nil {
		rt["database"], rt["schema"], rt["table"] = c.table.db, c.table.schema, c.table.name
	}
	return rt
}

// inferType gives a computed column (not a plain table column) the type
// Snowflake would report for DuckDB's result type.
func inferType(dt arrow.DataType) sfType {
	switch t := dt.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type:
		return sfType{name: "fixed", ddl: "NUMBER(38,0)", precision: 38}
	case *arrow.Decimal128Type:
		return sfType{name: "fixed", ddl: fmt.Sprintf("NUMBER(%d,%d)", t.Precision, t.Scale), precision: int(t.Precision), scale: int(t.Scale)}
	case *arrow.Float32Type, *arrow.Float64Type:
		return sfType{name: "real", ddl: "FLOAT"}
	case *arrow.BooleanType:
		return sfType{name: "boolean", ddl: "BOOLEAN"}
	case *arrow.Date32Type:
		return sfType{name: "date", ddl: "DATE"}
	case *arrow.Time64Type:
		return sfType{name: "time", ddl: "TIME(9)", scale: 9}
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return sfType{name: "timestamp_ltz", ddl: "TIMESTAMP_LTZ(9)", scale: 9}
		}
		return sfType{name: "timestamp_ntz", ddl: "TIMESTAMP_NTZ(9)", scale: 9}
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return sfType{name: "binary", ddl: "BINARY(8388608)", precision: 8388608}
	}
	return sfType{name: "text", ddl: "VARCHAR(16777216)", precision: 16777216}
}

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return
}()

// fixedWidth picks the narrowest integer type holding every unscaled
// value of the column in this chunk, as Snowflake does (SB1 … SB16).
func fixedWidth(recs []arrow.RecordBatch, col int) arrow.DataType {
	lo, hi := int64(0), int64(0)
	for _, r := range recs {
		a := r.Column(col)
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				continue
			}
			n, ok := unscaled(a, i)
			if !ok {
				return nil // needs 128 bits
			}
			lo, hi = min(lo, n), max(hi, n)
		}
	}
	switch {
	case lo >= math.MinInt8 && hi <= math.MaxInt8:
		return arrow.PrimitiveTypes.Int8
	case lo >= math.MinInt16 && hi <= math.MaxInt16:
		return arrow.PrimitiveTypes.Int16
	case lo >= math.MinInt32 && hi <= math.MaxInt32:
		return arrow.PrimitiveTypes.Int32
	}
	return arrow.PrimitiveTypes.Int64
}

// unscaled returns a NUMBER value as its scaled integer, if it fits 64 bits.
func unscaled(a arrow.Array, i int) (int64, bool) {
	switch x := a.(type) {
	case *array.Decimal128:
		hi, lo := x.Value(i).HighBits(), int64(x.Value(i).LowBits())
		if (hi == 0 && lo >= 0) || (hi == -1 && lo < 0) {
			return lo, true
		}
		return 0, false
	case *array.Int64:
		return x.Value(i), true
	case *array.Int32:
		return int64(x.Value(i)), true
	case *array.Int16:
		return int64(x.Value(i)), true
	case *array.Int8:
		return int64(x.Value(i)), true
	case *array.Uint32:
		return int64(x.Value(i)), true
	case *array.Uint16:
		return int64(x.Value(i)), true
	case *array.Uint8:
		return int64(x.Value(i)), true
	}
	return 0, false
}

// wireType is the Arrow type a column travels as.
func wireType(c resultCol, recs []arrow.RecordBatch, col int) arrow.DataType {
	i64, i32 := arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int32
	switch c.t.name {
	case "fixed":
		if w := fixedWidth(recs, col); w != nil {
			return w
		}
		return &arrow.Decimal128Type{Precision: 38, Scale: int32(c.t.scale)}
	case "real":
		return arrow.PrimitiveTypes.Float64
	case "boolean":
		return arrow.FixedWidthTypes.Boolean
	case "date":
		return arrow.FixedWidthTypes.Date32
	case "time":
		return i64
	case "timestamp_ntz", "timestamp_ltz":
		if c.t.scale <= 7 {
			return i64
		}
		return arrow.StructOf(arrow.Field{Name: "epoch", Type: i64}, arrow.Field{Name: "fraction", Type: i32})
	case "timestamp_tz":
		if c.t.scale <= 3 {
			return arrow.StructOf(arrow.Field{Name: "epoch", Type: i64}, arrow.Field{Name: "timezone", Type: i32})
		}
		return arrow.StructOf(arrow.Field{Name: "epoch", Type: i64}, arrow.Field{Name: "fraction", Type: i32}, arrow.Field{Name: "timezone", Type: i32})
	case "binary":
		return arrow.BinaryTypes.Binary
	}
	return arrow.BinaryTypes.String
}

// encode writes recs (DuckDB's result rows) as one Arrow IPC stream in
// Snowflake's wire encoding.
func encode(cols []resultCol, recs []arrow.RecordBatch, tzOffset int) ([]byte, error) {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		md := arrow.NewMetadata(
			[]string{"logicalType", "precision", "scale", "charLength", "finalType"},
			[]string{strings.ToUpper(c.t.name), strconv.Itoa(c.t.precision), strconv.Itoa(c.t.scale), strconv.Itoa(c.t.precision), "T"})
		fields[i] = arrow.Field{Name: c.name, Type: wireType(c, recs, i), Nullable: c.nullable, Metadata: md}
	}
	schema := arrow.NewSchema(fields, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	for _, r := range recs {
		arrs := make([]arrow.Array, len(cols))
		for i := range cols {
			a, err := encodeColumn(r.Column(i), cols[i], fields[i].Type, tzOffset)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", cols[i].name, err)
			}
			defer a.Release()
			arrs[i] = a
		}
		out := array.NewRecordBatch(schema, arrs, r.NumRows())
		err := w.Write(out)
		out.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeColumn(src arrow.Array, c resultCol, wt arrow.DataType, tzOffset int) (arrow.Array, error) {
	mem := memory.DefaultAllocator
	b := array.NewBuilder(mem, wt)
	defer b.Release()
	n := src.Len()
	b.Reserve(n)
	micros := func(i int) int64 {
		switch x := src.(type) {
		case *array.Timestamp:
			return int64(x.Value(i))
		case *array.Time64:
			return int64(x.Value(i))
		}
		return 0
	}
	for i := 0; i < n; i++ {
		if src.IsNull(i) {
			b.AppendNull()
			continue
		}
		switch bb := b.(type) {
		case *array.Int8Builder, *array.Int16Builder, *array.Int32Builder, *array.Int64Builder:
			v, _ := unscaled(src, i)
			if c.t.name == "fixed" {
				appendInt(bb, v)
			} else { // time or a timestamp at scale ≤ 7, from microseconds
				appendInt(bb, rescale(micros(i), c.t.scale))
			}
		case *array.Decimal128Builder:
			bb.Append(src.(*array.Decimal128).Value(i))
		case *array.StructBuilder:
			us := micros(i)
			bb.Append(true)
			epoch, frac := floorDiv(us, 1_000_000)
			k := 0
			if c.t.name == "timestamp_tz" && c.t.scale <= 3 {
				bb.FieldBuilder(0).(*array.Int64Builder).Append(rescale(us, c.t.scale))
			} else {
				bb.FieldBuilder(0).(*array.Int64Builder).Append(epoch)
				bb.FieldBuilder(1).(*array.Int32Builder).Append(int32(frac * 1000))
				k = 1
			}
			if c.t.name == "timestamp_tz" {
				bb.FieldBuilder(k + 1).(*array.Int32Builder).Append(int32(tzOffset + 1440))
			}
		case *array.Float64Builder:
			bb.Append(src.(*array.Float64).Value(i))
		case *array.BooleanBuilder:
			bb.Append(src.(*array.Boolean).Value(i))
		case *array.Date32Builder:
			bb.Append(src.(*array.Date32).Value(i))
		case *array.BinaryBuilder:
			bb.Append(src.(interface{ Value(int) []byte }).Value(i))
		case *array.StringBuilder:
			s, ok := src.(interface{ Value(int) string })
			if !ok {
				return nil, fmt.Errorf("cannot send %s as text", src.DataType())
			}
			bb.Append(s.Value(i))
		default:
			return nil, fmt.Errorf("no wire encoding for %s", wt)
		}
	}
	return b.NewArray(), nil
}

func appendInt(b array.Builder, v int64) {
	switch x := b.(type) {
	case *array.Int8Builder:
		x.Append(int8(v))
	case *array.Int16Builder:
		x.Append(int16(v))
	case *array.Int32Builder:
		x.Append(int32(v))
	case *array.Int64Builder:
		x.Append(v)
	}
}

// rescale turns microseconds into units of 10^-scale seconds, truncating
// toward minus infinity as Snowflake's fixed-scale storage does.
func rescale(us int64, scale int) int64 {
	if scale >= 6 {
		return us * pow10[scale-6]
	}
	q, _ := floorDiv(us, pow10[6-scale])
	return q
}

func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}
