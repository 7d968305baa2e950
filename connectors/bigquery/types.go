package bigquery

import (
	"fmt"
	"strings"

	bq "cloud.google.com/go/bigquery"
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
)

// The Arrow types below are the ones the Storage Read API sends, so
// Discover and Read agree; only a parameterised NUMERIC(P,S) or
// BIGNUMERIC(P,S) differs: the API sends every NUMERIC as decimal128(38,9)
// and every BIGNUMERIC as decimal256(76,38), and Read rescales a top-level
// parameterised column to its declared scale, so "12.34" stays 12.34.
var (
	timestampUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	datetimeType = &arrow.TimestampType{Unit: arrow.Microsecond}
	numericType  = &arrow.Decimal128Type{Precision: 38, Scale: 9}
	bignumType   = &arrow.Decimal256Type{Precision: 76, Scale: 38}
)

// standardType names a field's type in GoogleSQL; the client library
// reports the legacy names (INTEGER, FLOAT, BOOLEAN, RECORD).
func standardType(t bq.FieldType) string {
	switch t {
	case bq.IntegerFieldType:
		return "INT64"
	case bq.FloatFieldType:
		return "FLOAT64"
	case bq.BooleanFieldType:
		return "BOOL"
	case bq.RecordFieldType:
		return "STRUCT"
	}
	return string(t)
}

// sourceType renders the column type as BigQuery DDL spells it.
func sourceType(f *bq.FieldSchema) string {
	s := standardType(f.Type)
	switch {
	case s == "STRUCT":
		parts := make([]string, len(f.Schema))
		for i, sub := range f.Schema {
			parts[i] = sub.Name + " " + sourceType(sub)
		}
		s = "STRUCT<" + strings.Join(parts, ", ") + ">"
	case (s == "NUMERIC" || s == "BIGNUMERIC") && f.Precision > 0:
		s = fmt.Sprintf("%s(%d,%d)", s, f.Precision, f.Scale)
	case s == "STRING" || s == "BYTES":
		if f.MaxLength > 0 {
			s = fmt.Sprintf("%s(%d)", s, f.MaxLength)
		}
	case s == "RANGE" && f.RangeElementType != nil:
		s = "RANGE<" + string(f.RangeElementType.Type) + ">"
	}
	if f.Repeated {
		s = "ARRAY<" + s + ">"
	}
	return s
}

// arrowType maps a field to Arrow. top is false inside STRUCTs and ARRAYs,
// where NUMERIC parameters are not applied (Read only rescales top-level
// columns).
func arrowType(f *bq.FieldSchema, top bool) (arrow.DataType, error) {
	var t arrow.DataType
	switch standardType(f.Type) {
	case "INT64":
		t = arrow.PrimitiveTypes.Int64
	case "FLOAT64":
		t = arrow.PrimitiveTypes.Float64
	case "BOOL":
		t = arrow.FixedWidthTypes.Boolean
	case "STRING", "JSON", "GEOGRAPHY", "INTERVAL":
		// JSON arrives as its text, GEOGRAPHY as WKT; INTERVAL as its
		// canonical text form (e.g. "1-2 3 4:5:6").
		t = arrow.BinaryTypes.String
	case "BYTES":
		t = arrow.BinaryTypes.Binary
	case "DATE":
		t = arrow.FixedWidthTypes.Date32
	case "TIME":
		t = arrow.FixedWidthTypes.Time64us
	case "TIMESTAMP":
		t = timestampUTC
	case "DATETIME":
		t = datetimeType
	case "NUMERIC":
		t = numericType
		if top && f.Precision > 0 && !f.Repeated {
			t = &arrow.Decimal128Type{Precision: int32(f.Precision), Scale: int32(f.Scale)}
		}
	case "BIGNUMERIC":
		t = bignumType
		if top && f.Precision > 0 && !f.Repeated {
			t = &arrow.Decimal256Type{Precision: int32(f.Precision), Scale: int32(f.Scale)}
		}
	case "STRUCT":
		fields := make([]arrow.Field, len(f.Schema))
		for i, sub := range f.Schema {
			st, err := arrowType(sub, false)
			if err != nil {
				return nil, err
			}
			fields[i] = arrow.Field{Name: sub.Name, Type: st, Nullable: !sub.Required}
		}
		t = arrow.StructOf(fields...)
	case "RANGE":
		elem := &bq.FieldSchema{Type: bq.DateFieldType}
		if f.RangeElementType != nil {
			elem.Type = f.RangeElementType.Type
		}
		et, err := arrowType(elem, false)
		if err != nil {
			return nil, err
		}
		t = arrow.StructOf(arrow.Field{Name: "start", Type: et, Nullable: true}, arrow.Field{Name: "end", Type: et, Nullable: true})
	default:
		return nil, fmt.Errorf("column %s: unsupported BigQuery type %s", f.Name, f.Type)
	}
	if f.Repeated {
		t = arrow.ListOf(t)
	}
	return t, nil
}

// columns maps a table schema to connector columns, and names each
// column's GoogleSQL type (for watermark literals).
func columns(s bq.Schema) ([]connectors.Column, map[string]string, error) {
	cols := make([]connectors.Column, len(s))
	types := make(map[string]string, len(s))
	for i, f := range s {
		t, err := arrowType(f, true)
		if err != nil {
			return nil, nil, err
		}
		// A REPEATED column is never NULL (BigQuery stores NULL as an empty
		// array) but is reported nullable: the catalog has no NOT NULL for it.
		cols[i] = connectors.Column{Name: f.Name, Type: t, Nullable: !f.Required, SourceType: sourceType(f)}
		if !f.Repeated {
			types[f.Name] = standardType(f.Type)
		}
	}
	return cols, types, nil
}
