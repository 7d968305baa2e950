package bigquery

import (
	"fmt"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// conformer turns Storage Read batches into the schema Discover reports:
// columns in the requested order (the API sends them in table order,
// whatever the order of selected_fields), parameterised decimals at their
// declared scale, and list/struct types with the same layout relabelled
// (child field names and nullability are not part of a column's meaning).
type conformer struct {
	want []arrow.Field
	log  *slog.Logger

	src    *arrow.Schema // schema the plan below was built for
	idx    []int
	how    []convKind
	schema *arrow.Schema
}

type convKind uint8

const (
	convSame convKind = iota
	convRetype
	convRescale
	convPassThrough // an unexpected type: kept as sent
)

func (c *conformer) plan(src *arrow.Schema) error {
	c.src, c.idx, c.how = src, make([]int, len(c.want)), make([]convKind, len(c.want))
	fields := make([]arrow.Field, len(c.want))
	for i, w := range c.want {
		idx := src.FieldIndices(w.Name)
		if len(idx) == 0 {
			return fmt.Errorf("the Storage Read API sent no column %q", w.Name)
		}
		c.idx[i] = idx[0]
		got := src.Field(idx[0]).Type
		fields[i] = arrow.Field{Name: w.Name, Type: w.Type, Nullable: true}
		switch {
		case arrow.TypeEqual(got, w.Type):
			c.how[i] = convSame
		case sameLayout(got, w.Type):
			c.how[i] = convRetype
		case (got.ID() == arrow.DECIMAL128 || got.ID() == arrow.DECIMAL256) && got.ID() == w.Type.ID():
			c.how[i] = convRescale
		default:
			c.how[i] = convPassThrough
			fields[i].Type = got
			c.log.Warn("unexpected Arrow type from the Storage Read API; passed through",
				"column", w.Name, "got", got.String(), "want", w.Type.String())
		}
	}
	c.schema = arrow.NewSchema(fields, nil)
	return nil
}

// conform returns rec in the wanted schema; the caller releases both.
func (c *conformer) conform(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if c.src == nil || !c.src.Equal(rec.Schema()) {
		if err := c.plan(rec.Schema()); err != nil {
			return nil, err
		}
	}
	cols := make([]arrow.Array, len(c.want))
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	for i, j := range c.idx {
		col := rec.Column(j)
		switch c.how[i] {
		case convSame, convPassThrough:
			col.Retain()
			cols[i] = col
		case convRetype:
			d := retype(col.Data(), c.want[i].Type)
			cols[i] = array.MakeFromData(d)
			d.Release()
		case convRescale:
			a, err := rescale(col, c.want[i].Type)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.want[i].Name, err)
			}
			cols[i] = a
		}
	}
	return array.NewRecordBatch(c.schema, cols, rec.NumRows()), nil
}

// sameLayout reports types whose buffers are laid out the same and mean
// the same, differing only in child field names or nullability.
func sameLayout(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch at := a.(type) {
	case *arrow.ListType:
		return sameLayout(at.Elem(), b.(*arrow.ListType).Elem())
	case *arrow.LargeListType:
		return sameLayout(at.Elem(), b.(*arrow.LargeListType).Elem())
	case *arrow.StructType:
		bt := b.(*arrow.StructType)
		if at.NumFields() != bt.NumFields() {
			return false
		}
		for i := range at.Fields() {
			if at.Field(i).Name != bt.Field(i).Name || !sameLayout(at.Field(i).Type, bt.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return arrow.TypeEqual(a, b)
}

// retype gives d (and its children) the types of t; see sameLayout.
func retype(d arrow.ArrayData, t arrow.DataType) arrow.ArrayData {
	var children []arrow.ArrayData
	for i, ch := range d.Children() {
		var ct arrow.DataType
		switch tt := t.(type) {
		case arrow.ListLikeType:
			ct = tt.Elem()
		case *arrow.StructType:
			ct = tt.Field(i).Type
		default:
			ct = ch.DataType()
		}
		children = append(children, retype(ch, ct))
	}
	out := array.NewData(t, d.Len(), d.Buffers(), children, d.NullN(), d.Offset())
	for _, ch := range children {
		ch.Release()
	}
	return out
}

// rescale converts a decimal column to t's scale. Values come from a
// column declared with t's precision and scale, so no rounding is needed;
// one that does not fit is an error rather than a silently changed value.
func rescale(col arrow.Array, t arrow.DataType) (arrow.Array, error) {
	switch src := col.(type) {
	case *array.Decimal128:
		from := src.DataType().(*arrow.Decimal128Type).Scale
		to := t.(*arrow.Decimal128Type)
		b := array.NewDecimal128Builder(memory.DefaultAllocator, to)
		defer b.Release()
		b.Reserve(src.Len())
		for i := 0; i < src.Len(); i++ {
			if src.IsNull(i) {
				b.AppendNull()
				continue
			}
			v, err := src.Value(i).Rescale(from, to.Scale)
			if err != nil || !v.FitsInPrecision(to.Precision) {
				return nil, fmt.Errorf("value %s does not fit %s", src.ValueStr(i), to)
			}
			b.Append(v)
		}
		return b.NewArray(), nil
	case *array.Decimal256:
		from := src.DataType().(*arrow.Decimal256Type).Scale
		to := t.(*arrow.Decimal256Type)
		b := array.NewDecimal256Builder(memory.DefaultAllocator, to)
		defer b.Release()
		b.Reserve(src.Len())
		for i := 0; i < src.Len(); i++ {
			if src.IsNull(i) {
				b.AppendNull()
				continue
			}
			v, err := src.Value(i).Rescale(from, to.Scale)
			if err != nil || !v.FitsInPrecision(to.Precision) {
				return nil, fmt.Errorf("value %s does not fit %s", src.ValueStr(i), to)
			}
			b.Append(v)
		}
		return b.NewArray(), nil
	}
	return nil, fmt.Errorf("cannot rescale %s", col.DataType())
}
