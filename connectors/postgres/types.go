package postgres

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgtype"
)

// kind is how a column's wire bytes are decoded.
type kind uint8

const (
	kText kind = iota // text, varchar, char, name, json; any type read in text format
	kInt16
	kInt32
	kInt64
	kFloat32
	kFloat64
	kBool
	kJSONB
	kUUID
	kBytea
	kTimestamp
	kDate
	kDecimal     // numeric(p,s) with p ≤ 38
	kNumericText // numeric without typmod or wider than decimal128
	kList
)

// column is one result column: the Arrow type it becomes, the wire format
// requested for it, and (for arrays) its element.
type column struct {
	name   string
	oid    uint32
	kind   kind
	typ    arrow.DataType
	format int16
	scale  int32
	elem   *column
}

var (
	timestampType   = &arrow.TimestampType{Unit: arrow.Microsecond}
	timestamptzType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
)

// scalar maps the element types decoded from the binary format. Any other
// type (interval, inet, enums, domains, extension types) is read in text
// format as its usual text rendering, so no column is unreadable.
var scalar = map[uint32]struct {
	kind kind
	typ  arrow.DataType
}{
	pgtype.Int2OID:        {kInt16, arrow.PrimitiveTypes.Int16},
	pgtype.Int4OID:        {kInt32, arrow.PrimitiveTypes.Int32},
	pgtype.Int8OID:        {kInt64, arrow.PrimitiveTypes.Int64},
	pgtype.Float4OID:      {kFloat32, arrow.PrimitiveTypes.Float32},
	pgtype.Float8OID:      {kFloat64, arrow.PrimitiveTypes.Float64},
	pgtype.BoolOID:        {kBool, arrow.FixedWidthTypes.Boolean},
	pgtype.TextOID:        {kText, arrow.BinaryTypes.String},
	pgtype.VarcharOID:     {kText, arrow.BinaryTypes.String},
	pgtype.BPCharOID:      {kText, arrow.BinaryTypes.String},
	pgtype.NameOID:        {kText, arrow.BinaryTypes.String},
	pgtype.JSONOID:        {kText, arrow.BinaryTypes.String},
	pgtype.JSONBOID:       {kJSONB, arrow.BinaryTypes.String},
	pgtype.UUIDOID:        {kUUID, arrow.BinaryTypes.String},
	pgtype.ByteaOID:       {kBytea, arrow.BinaryTypes.Binary},
	pgtype.TimestampOID:   {kTimestamp, timestampType},
	pgtype.TimestamptzOID: {kTimestamp, timestamptzType},
	pgtype.DateOID:        {kDate, arrow.FixedWidthTypes.Date32},
	pgtype.NumericOID:     {kNumericText, arrow.BinaryTypes.String},
}

// arrays maps array types to their element type.
var arrays = map[uint32]uint32{
	pgtype.Int2ArrayOID: pgtype.Int2OID, pgtype.Int4ArrayOID: pgtype.Int4OID, pgtype.Int8ArrayOID: pgtype.Int8OID,
	pgtype.Float4ArrayOID: pgtype.Float4OID, pgtype.Float8ArrayOID: pgtype.Float8OID, pgtype.BoolArrayOID: pgtype.BoolOID,
	pgtype.TextArrayOID: pgtype.TextOID, pgtype.VarcharArrayOID: pgtype.VarcharOID, pgtype.BPCharArrayOID: pgtype.BPCharOID,
	pgtype.NameArrayOID: pgtype.NameOID, pgtype.JSONArrayOID: pgtype.JSONOID, pgtype.JSONBArrayOID: pgtype.JSONBOID,
	pgtype.UUIDArrayOID: pgtype.UUIDOID, pgtype.ByteaArrayOID: pgtype.ByteaOID, pgtype.TimestampArrayOID: pgtype.TimestampOID,
	pgtype.TimestamptzArrayOID: pgtype.TimestamptzOID, pgtype.DateArrayOID: pgtype.DateOID, pgtype.NumericArrayOID: pgtype.NumericOID,
}

// newColumn maps a result column's type OID and modifier to Arrow. For an
// array the modifier is its element's (numeric(10,2)[] keeps the scale).
func newColumn(name string, oid uint32, typmod int32) column {
	if elemOID, ok := arrays[oid]; ok {
		elem := newColumn("item", elemOID, typmod)
		return column{name: name, oid: oid, kind: kList, typ: arrow.ListOf(elem.typ),
			format: pgtype.BinaryFormatCode, elem: &elem}
	}
	s, ok := scalar[oid]
	if !ok {
		return column{name: name, oid: oid, kind: kText, typ: arrow.BinaryTypes.String, format: pgtype.TextFormatCode}
	}
	c := column{name: name, oid: oid, kind: s.kind, typ: s.typ, format: pgtype.BinaryFormatCode}
	if oid == pgtype.NumericOID {
		if p, sc, ok := numericTypmod(typmod); ok {
			c.kind, c.scale = kDecimal, sc
			c.typ = &arrow.Decimal128Type{Precision: p, Scale: sc}
		}
	}
	return c
}

// numericTypmod unpacks numeric(p,s)'s modifier when decimal128 can hold
// every value of the column. PostgreSQL 15 allows a negative scale or one
// above the precision; those stay text, like unconstrained numeric.
func numericTypmod(typmod int32) (precision, scale int32, ok bool) {
	const varhdrsz = 4
	if typmod < varhdrsz {
		return 0, 0, false
	}
	t := typmod - varhdrsz
	precision = (t >> 16) & 0xffff
	scale = ((t & 0x7ff) ^ 1024) - 1024
	if precision < 1 || precision > 38 || scale < 0 || scale > precision {
		return 0, 0, false
	}
	return precision, scale, true
}

// schema is the Arrow schema of a read. Every field is nullable whatever
// the catalog says: ±infinity timestamps and NaN decimals arrive as NULL
// (decode.go), and Discover reports the catalog's NOT NULL separately.
func schema(cols []column) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}
