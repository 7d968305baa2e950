package mapping

import (
	"encoding/base64"
	"math"
	"strconv"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

type vkind uint8

const (
	kOther vkind = iota // rare types: Arrow's own text rendering, as a string
	kNull
	kInt
	kUint
	kFloat
	kBool
	kString
	kBinary
	kTimestamp
	kDate32
	kDate64
	kDecimal
	kList
	kStruct
	kMap
	kDict
)

// venc encodes the values of one Arrow column (or nested child) as JSON.
// It is chosen once per schema from the type; bind points it at each
// batch's array, so encoding a value is a switch and an append.
type venc struct {
	kind  vkind
	dt    arrow.DataType
	unit  arrow.TimeUnit
	scale int32
	json  bool // a text or binary column that holds JSON documents
	// nullish kinds have values that read as NULL without a validity bit.
	nullish bool

	arr    arrow.Array
	valid  []byte // validity bitmap, nil when the array has no NULLs
	off    int    // the array's offset into its bitmap
	intsFn func(i int) int64
	uints  func(i int) uint64
	fltsFn func(i int) float64
	strFn  func(i int) string
	bin    func(i int) []byte

	// The common layouts are read directly rather than through the
	// closures above: an indirect call per value adds up over a row.
	i64  []int64 // int64 and timestamp values; narrower ones widened into wide
	wide []int64
	f64  []float64
	offs []int32 // string offsets (data holds the bytes)
	data string
	loff []int32 // list offsets, from the array's own offset
	bits []byte  // boolean values
	boff int

	elem   *venc  // list elements, dictionary values, map values
	key    *venc  // map keys
	fields []venc // struct fields
	names  []string
}

func newVenc(dt arrow.DataType, isJSON bool) venc {
	v := venc{dt: dt, json: isJSON}
	switch t := dt.(type) {
	case *arrow.NullType:
		v.kind = kNull
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
		v.kind = kInt
	case *arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type:
		v.kind = kUint
	case *arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type:
		v.kind = kFloat
	case *arrow.BooleanType:
		v.kind = kBool
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		v.kind = kString
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		v.kind = kBinary
	case *arrow.TimestampType:
		v.kind, v.unit = kTimestamp, t.Unit
	case *arrow.Date32Type:
		v.kind = kDate32
	case *arrow.Date64Type:
		v.kind = kDate64
	case *arrow.Decimal128Type:
		v.kind, v.scale = kDecimal, t.Scale
	case *arrow.ListType:
		v.kind = kList
		e := newVenc(t.Elem(), false)
		v.elem = &e
	case *arrow.LargeListType:
		v.kind = kList
		e := newVenc(t.Elem(), false)
		v.elem = &e
	case *arrow.FixedSizeListType:
		v.kind = kList
		e := newVenc(t.Elem(), false)
		v.elem = &e
	case *arrow.MapType:
		v.kind = kMap
		k, e := newVenc(t.KeyType(), false), newVenc(t.ItemType(), false)
		v.key, v.elem = &k, &e
	case *arrow.StructType:
		v.kind = kStruct
		for _, f := range t.Fields() {
			v.fields = append(v.fields, newVenc(f.Type, false))
			v.names = append(v.names, f.Name)
		}
	case *arrow.DictionaryType:
		v.kind = kDict
		e := newVenc(t.ValueType, isJSON)
		v.elem = &e
	case arrow.ExtensionType:
		v = newVenc(t.StorageType(), isJSON || t.ExtensionName() == "arrow.json")
	default:
		v.kind = kOther
	}
	v.nullish = v.kind == kNull || v.kind == kFloat || v.kind == kDict
	return v
}

// bind points the encoder (and its children) at arr.
func (v *venc) bind(arr arrow.Array) {
	if ext, ok := arr.(array.ExtensionArray); ok {
		arr = ext.Storage()
	}
	v.arr = arr
	v.valid, v.off = nil, arr.Data().Offset()
	if arr.NullN() > 0 {
		v.valid = arr.NullBitmapBytes()
	}
	v.i64, v.f64, v.offs, v.data, v.loff, v.bits = nil, nil, nil, "", nil, nil
	switch a := arr.(type) {
	case *array.Int8:
		v.intsFn = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int16:
		v.intsFn = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int32:
		v.i64 = v.widen(a.Int32Values())
		v.intsFn = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int64:
		v.i64 = a.Int64Values()
		v.intsFn = func(i int) int64 { return a.Value(i) }
	case *array.Uint8:
		v.uints = func(i int) uint64 { return uint64(a.Value(i)) }
	case *array.Uint16:
		v.uints = func(i int) uint64 { return uint64(a.Value(i)) }
	case *array.Uint32:
		v.uints = func(i int) uint64 { return uint64(a.Value(i)) }
	case *array.Uint64:
		v.uints = a.Value
	case *array.Boolean:
		if bufs := a.Data().Buffers(); len(bufs) > 1 && bufs[1] != nil {
			v.bits, v.boff = bufs[1].Bytes(), a.Data().Offset()
		}
	case *array.Float16:
		v.fltsFn = func(i int) float64 { return float64(a.Value(i).Float32()) }
	case *array.Float32:
		v.fltsFn = func(i int) float64 { return float64(a.Value(i)) }
	case *array.Float64:
		v.f64 = a.Float64Values()
		v.fltsFn = func(i int) float64 { return a.Value(i) }
	case *array.String:
		v.strFn = a.Value
		if bufs := a.Data().Buffers(); a.Len() > 0 && len(bufs) > 2 && bufs[2] != nil {
			v.offs, v.data = a.ValueOffsets(), b2s(bufs[2].Bytes())
		}
	case *array.LargeString:
		v.strFn = a.Value
	case *array.StringView:
		v.strFn = a.Value
	case *array.Binary:
		v.bin = a.Value
	case *array.LargeBinary:
		v.bin = a.Value
	case *array.BinaryView:
		v.bin = a.Value
	case *array.Timestamp:
		if vals := a.TimestampValues(); len(vals) > 0 {
			v.i64 = unsafe.Slice((*int64)(unsafe.Pointer(&vals[0])), len(vals))
		}
		v.intsFn = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Date32:
		if vals := a.Date32Values(); len(vals) > 0 {
			v.i64 = v.widen(unsafe.Slice((*int32)(unsafe.Pointer(&vals[0])), len(vals)))
		}
		v.intsFn = func(i int) int64 { return int64(a.Value(i)) }
	case *array.Date64:
		v.intsFn = func(i int) int64 { return int64(a.Value(i)) }
	case *array.List:
		if o := a.Offsets(); len(o) > a.Data().Offset() {
			v.loff = o[a.Data().Offset():]
		}
		v.elem.bind(a.ListValues())
	case *array.LargeList:
		v.elem.bind(a.ListValues())
	case *array.FixedSizeList:
		v.elem.bind(a.ListValues())
	case *array.Map:
		if o := a.Offsets(); len(o) > a.Data().Offset() {
			v.loff = o[a.Data().Offset():]
		}
		v.key.bind(a.Keys())
		v.elem.bind(a.Items())
	case *array.Struct:
		for f := range v.fields {
			v.fields[f].bind(a.Field(f))
		}
	case *array.Dictionary:
		v.elem.bind(a.Dictionary())
		v.intsFn = func(i int) int64 { return int64(a.GetValueIndex(i)) }
	}
}

// widen copies 32-bit values into v.wide, once per batch, so that ints
// is one load for them too.
func (v *venc) widen(vals []int32) []int64 {
	if len(vals) == 0 {
		return nil
	}
	w := v.wide[:0]
	for _, x := range vals {
		w = append(w, int64(x))
	}
	v.wide = w
	return w
}

// ints, flts and isNull are small enough for the compiler to inline (str
// just misses); the rare layouts go through the closures or isNullSlow.
func (v *venc) ints(i int) int64 {
	if v.i64 != nil {
		return v.i64[i]
	}
	return v.intsFn(i)
}

func (v *venc) flts(i int) float64 {
	if v.f64 != nil {
		return v.f64[i]
	}
	return v.fltsFn(i)
}

func (v *venc) str(i int) string {
	if v.offs != nil {
		return v.data[v.offs[i]:v.offs[i+1]]
	}
	return v.strFn(i)
}

func (v *venc) isNull(i int) bool {
	if v.valid == nil && !v.nullish {
		return false
	}
	return v.isNullSlow(i)
}

func (v *venc) isNullSlow(i int) bool {
	if v.valid != nil {
		j := i + v.off
		if v.valid[j>>3]&(1<<(j&7)) == 0 {
			return true
		}
	}
	switch v.kind {
	case kNull:
		return true
	case kFloat:
		f := v.flts(i)
		return math.IsNaN(f) || math.IsInf(f, 0) // not representable in JSON
	case kDict:
		return v.elem.isNull(int(v.ints(i)))
	}
	return false
}

// listBounds returns the element range of list row i.
func (v *venc) listBounds(i int) (int, int) {
	if v.loff != nil {
		return int(v.loff[i]), int(v.loff[i+1])
	}
	switch a := v.arr.(type) {
	case *array.List:
		s, e := a.ValueOffsets(i)
		return int(s), int(e)
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		return int(s), int(e)
	case *array.FixedSizeList:
		n := a.DataType().(*arrow.FixedSizeListType).Len()
		return (i + a.Offset()) * int(n), (i + a.Offset() + 1) * int(n)
	case *array.Map:
		s, e := a.ValueOffsets(i)
		return int(s), int(e)
	}
	return 0, 0
}

// appendValue appends row i (known non-null) as a JSON value. Nested
// values (list items, struct fields inside lists) are not flattened.
func (v *venc) appendValue(dst []byte, i int) []byte {
	switch v.kind {
	case kInt:
		x := v.ints(i)
		if uint64(x) < 10 {
			return append(dst, byte('0'+x))
		}
		return appendInt(dst, x)
	case kUint:
		return appendUint(dst, v.uints(i))
	case kFloat:
		return strconv.AppendFloat(dst, v.flts(i), 'g', -1, 64)
	case kBool:
		if v.bits == nil {
			return strconv.AppendBool(dst, v.arr.(*array.Boolean).Value(i))
		}
		if j := v.boff + i; v.bits[j>>3]&(1<<(j&7)) != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kString:
		if v.json {
			return appendRawJSON(dst, v.str(i))
		}
		return appendString(dst, v.str(i))
	case kBinary:
		b := v.bin(i)
		if v.json {
			return appendRawJSON(dst, b2s(b))
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	case kTimestamp:
		dst = append(dst, '"')
		dst = appendISO(dst, toMicros(v.ints(i), v.unit))
		return append(dst, '"')
	case kDate32:
		dst = append(dst, '"')
		dst = appendDate(dst, v.ints(i))
		return append(dst, '"')
	case kDate64:
		dst = append(dst, '"')
		dst = appendDate(dst, floorDiv(v.ints(i), 86_400_000))
		return append(dst, '"')
	case kDecimal:
		return appendDecimal(dst, v.arr.(*array.Decimal128).Value(i), v.scale)
	case kList:
		s, e := v.listBounds(i)
		dst = append(dst, '[')
		for j := s; j < e; j++ {
			if j > s {
				dst = append(dst, ',')
			}
			dst = v.elem.appendOrNull(dst, j)
		}
		return append(dst, ']')
	case kStruct:
		dst = append(dst, '{')
		n := 0
		for f := range v.fields {
			if v.fields[f].isNull(i) {
				continue
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = appendString(dst, v.names[f])
			dst = append(dst, ':')
			dst = v.fields[f].appendValue(dst, i)
		}
		return append(dst, '}')
	case kMap:
		s, e := v.listBounds(i)
		dst = append(dst, '{')
		for j := s; j < e; j++ {
			if j > s {
				dst = append(dst, ',')
			}
			dst = v.key.appendKey(dst, j)
			dst = append(dst, ':')
			dst = v.elem.appendOrNull(dst, j)
		}
		return append(dst, '}')
	case kDict:
		return v.elem.appendValue(dst, int(v.ints(i)))
	}
	return jsonw.String(dst, v.arr.ValueStr(i))
}

func (v *venc) appendOrNull(dst []byte, i int) []byte {
	if v.isNull(i) {
		return append(dst, "null"...)
	}
	return v.appendValue(dst, i)
}

// appendKey appends row i as a JSON object key (map keys may be numbers).
func (v *venc) appendKey(dst []byte, i int) []byte {
	if v.kind == kString {
		return appendString(dst, v.str(i))
	}
	start := len(dst)
	dst = v.appendValue(dst, i)
	if len(dst) > start && dst[start] == '"' {
		return dst
	}
	s := string(dst[start:])
	return jsonw.String(dst[:start], s)
}
