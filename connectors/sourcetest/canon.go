package sourcetest

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Canon returns row i of arr in the canonical Go form fixtures are written
// in, whatever Arrow type the connector chose (int32 or int64, string or
// large string, any timestamp unit, decimal128 or decimal256). Strings
// and bytes are copied: Arrow's point into the batch, which is released
// after the callback returns.
func Canon(arr arrow.Array, i int) any {
	if arr.IsNull(i) {
		return nil
	}
	switch a := arr.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Uint64:
		return int64(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return strings.Clone(a.Value(i))
	case *array.LargeString:
		return strings.Clone(a.Value(i))
	case *array.StringView:
		return strings.Clone(a.Value(i))
	case *array.Binary:
		return append([]byte{}, a.Value(i)...)
	case *array.LargeBinary:
		return append([]byte{}, a.Value(i)...)
	case *array.BinaryView:
		return append([]byte{}, a.Value(i)...)
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC()
	case *array.Date32:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Date64:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Decimal256:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale)
	case *array.List:
		start, end := a.ValueOffsets(i)
		return listCanon(a.ListValues(), start, end)
	case *array.LargeList:
		start, end := a.ValueOffsets(i)
		return listCanon(a.ListValues(), start, end)
	case array.ExtensionArray:
		return Canon(a.Storage(), i)
	}
	return fmt.Sprintf("<unsupported %s>", arr.DataType())
}

func listCanon(values arrow.Array, start, end int64) any {
	out := make([]int64, 0, end-start)
	for j := start; j < end; j++ {
		v, ok := Canon(values, int(j)).(int64)
		if !ok {
			return fmt.Sprintf("<list of %s>", values.DataType())
		}
		out = append(out, v)
	}
	return out
}
