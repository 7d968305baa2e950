package run

import (
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/engine/mapping"
)

// rowKeys holds the ledger key of each row of one batch when the table
// has a primary key: the key column's value as text, or for a composite
// key the values joined by a tab in key order (how the app API takes
// them). All of a batch's keys share one buffer, so they cost no
// allocation per row.
type rowKeys struct {
	cols []int   // the key columns' indexes in the Arrow schema
	buf  []byte  // the keys' text, back to back
	ends []int32 // row i's key is buf[ends[i-1]:ends[i]]
}

// keySep joins the values of a composite key.
const keySep = '\t'

// pkColumns finds the primary key's columns in an Arrow schema; nil when
// the table has none or a key column is not among the rows read.
func pkColumns(pk []string, s *arrow.Schema) []int {
	if len(pk) == 0 {
		return nil
	}
	cols := make([]int, 0, len(pk))
	for _, name := range pk {
		idx := s.FieldIndices(name)
		if len(idx) == 0 {
			return nil
		}
		cols = append(cols, idx[0])
	}
	return cols
}

// fill computes every row's key of rec.
func (k *rowKeys) fill(rec arrow.RecordBatch) {
	k.buf, k.ends = k.buf[:0], k.ends[:0]
	n := int(rec.NumRows())
	for i := range n {
		for j, c := range k.cols {
			if j > 0 {
				k.buf = append(k.buf, keySep)
			}
			k.buf = appendValue(k.buf, rec.Column(c), i)
		}
		k.ends = append(k.ends, int32(len(k.buf)))
	}
}

// key returns row i's key; it points into the buffer.
func (k *rowKeys) key(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.buf[start:k.ends[i]]
}

// appendValue appends a key value's text: integers in decimal and text as
// it is without allocating; other types as Arrow formats them.
func appendValue(dst []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return dst
	}
	switch v := a.(type) {
	case *array.Int64:
		return strconv.AppendInt(dst, v.Value(i), 10)
	case *array.Int32:
		return strconv.AppendInt(dst, int64(v.Value(i)), 10)
	case *array.Int16:
		return strconv.AppendInt(dst, int64(v.Value(i)), 10)
	case *array.Int8:
		return strconv.AppendInt(dst, int64(v.Value(i)), 10)
	case *array.Uint64:
		return strconv.AppendUint(dst, v.Value(i), 10)
	case *array.Uint32:
		return strconv.AppendUint(dst, uint64(v.Value(i)), 10)
	case *array.String:
		return append(dst, v.Value(i)...)
	case *array.LargeString:
		return append(dst, v.Value(i)...)
	case *array.Binary:
		return append(dst, v.Value(i)...)
	}
	return append(dst, a.ValueStr(i)...)
}

// eventRows lists, for each event the validator kept, its batch row: the
// mapped records' rows minus those the validator refused (events come
// out in record order, one per record kept).
func eventRows(dst []int32, out *mapping.Records, fails []mapping.RowError, base int64, refused []int32) ([]int32, []int32) {
	refused = refused[:0]
	for _, f := range fails {
		refused = append(refused, int32(f.Row-base))
	}
	slices.Sort(refused)
	dst = dst[:0]
	for _, row := range out.Rows {
		if len(refused) > 0 {
			if _, found := slices.BinarySearch(refused, row); found {
				continue
			}
		}
		dst = append(dst, row)
	}
	return dst, refused
}
