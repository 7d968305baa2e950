package mapping

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/connectors"
)

var t0 = time.Date(2026, 11, 1, 12, 30, 45, 123456000, time.UTC)

// wideSchema has one column of every supported Arrow type plus the role
// columns of an events import.
var wideSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "event_type", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "event_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "user_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "device_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "loaded_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
	{Name: "props", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "shipping", Type: arrow.StructOf(
		arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "zip", Type: arrow.PrimitiveTypes.Int32, Nullable: true}), Nullable: true},
	{Name: "amount_usd", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "active", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "day", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "raw", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "internal_note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// wideConnSchema is what Discover would say: props is a JSON column, id
// the primary key.
func wideConnSchema() *connectors.Schema {
	s := &connectors.Schema{PrimaryKey: []string{"id"}}
	for _, f := range wideSchema.Fields() {
		st := "VARCHAR"
		if f.Name == "props" {
			st = "JSON"
		}
		s.Columns = append(s.Columns, connectors.Column{Name: f.Name, Type: f.Type, Nullable: f.Nullable, SourceType: st})
	}
	return s
}

type wideRow struct {
	id           int64
	event        *string
	at           *time.Time
	user, device *string
	props        *string
	city         *string
	zip          *int32
	shippingNull bool
	amount       *int64 // cents
	qty          *int32
	price        *float64
	active       *bool
	day          *int32
	tags         []string
	attrs        map[string]int64
	raw          []byte
	note         *string
}

func ptr[T any](v T) *T { return &v }

func wideRows() []wideRow {
	return []wideRow{
		{id: 1, event: ptr("Purchase"), at: ptr(t0), user: ptr("user-1"), device: ptr("dev-1"),
			props: ptr(`{"plan":"pro","cart":{"items":3,"coupon":{"code":"X1"}},"qty":99,"list":[1,{"a":2}],"gone":null}`),
			city:  ptr("Zürich"), zip: ptr(int32(8001)), amount: ptr(int64(1234)), qty: ptr(int32(2)), price: ptr(9.99),
			active: ptr(true), day: ptr(int32(20393)), tags: []string{"a", "b \"quoted\""}, attrs: map[string]int64{"k": 7},
			raw: []byte{0, 1, 2, 250}, note: ptr("secret")},
		{id: 2, event: ptr("Signup"), at: ptr(t0.Add(-time.Hour)), device: ptr("dev-2"), shippingNull: true,
			amount: ptr(int64(-5)), price: ptr(0.1), tags: []string{}},
		{id: 3, event: ptr("Purchase"), at: nil, user: ptr("user-3")},                       // NULL time: a row error
		{id: 4, event: nil, at: ptr(t0), user: ptr("user-4")},                               // NULL event: a row error
		{id: 5, event: ptr("View"), at: ptr(t0), props: ptr(`not json`), city: ptr("Oslo")}, // no user, no device
	}
}

func buildWide(rows []wideRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, wideSchema)
	defer b.Release()
	str := func(f int, v *string) {
		if v == nil {
			b.Field(f).AppendNull()
		} else {
			b.Field(f).(*array.StringBuilder).Append(*v)
		}
	}
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.id)
		str(1, r.event)
		if r.at == nil {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(r.at.UnixMicro()))
		}
		str(3, r.user)
		str(4, r.device)
		b.Field(5).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(r.id) * time.Minute).UnixMicro()))
		str(6, r.props)
		sb := b.Field(7).(*array.StructBuilder)
		if r.shippingNull {
			sb.AppendNull()
		} else {
			sb.Append(true)
			if r.city == nil {
				sb.FieldBuilder(0).AppendNull()
			} else {
				sb.FieldBuilder(0).(*array.StringBuilder).Append(*r.city)
			}
			if r.zip == nil {
				sb.FieldBuilder(1).AppendNull()
			} else {
				sb.FieldBuilder(1).(*array.Int32Builder).Append(*r.zip)
			}
		}
		if r.amount == nil {
			b.Field(8).AppendNull()
		} else {
			b.Field(8).(*array.Decimal128Builder).Append(decimal128.FromI64(*r.amount))
		}
		if r.qty == nil {
			b.Field(9).AppendNull()
		} else {
			b.Field(9).(*array.Int32Builder).Append(*r.qty)
		}
		if r.price == nil {
			b.Field(10).AppendNull()
		} else {
			b.Field(10).(*array.Float64Builder).Append(*r.price)
		}
		if r.active == nil {
			b.Field(11).AppendNull()
		} else {
			b.Field(11).(*array.BooleanBuilder).Append(*r.active)
		}
		if r.day == nil {
			b.Field(12).AppendNull()
		} else {
			b.Field(12).(*array.Date32Builder).Append(arrow.Date32(*r.day))
		}
		lb := b.Field(13).(*array.ListBuilder)
		if r.tags == nil {
			lb.AppendNull()
		} else {
			lb.Append(true)
			for _, t := range r.tags {
				lb.ValueBuilder().(*array.StringBuilder).Append(t)
			}
		}
		mb := b.Field(14).(*array.MapBuilder)
		if r.attrs == nil {
			mb.AppendNull()
		} else {
			mb.Append(true)
			for k, v := range r.attrs {
				mb.KeyBuilder().(*array.StringBuilder).Append(k)
				mb.ItemBuilder().(*array.Int64Builder).Append(v)
			}
		}
		if r.raw == nil {
			b.Field(15).AppendNull()
		} else {
			b.Field(15).(*array.BinaryBuilder).Append(r.raw)
		}
		str(16, r.note)
	}
	return b.NewRecordBatch()
}

func connTable(name string) connectors.Table { return connectors.Table{Name: name} }
