package run

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tributary-dev/tributary/connectors"
)

// cursor is a time_based import's watermark: the (insert time, tie key...)
// of the last row committed. It is stored as the import's checkpoint, in
// the same store transaction as that row's records.
type cursor struct {
	Columns []string `json:"columns"`
	Values  []value  `json:"values"`
	// Inclusive: no unique tie key, so the next read starts at the insert
	// time itself and dedup absorbs the rows re-read (see Watermark).
	Inclusive bool `json:"inclusive,omitempty"`
}

// value is one watermark value with its Go type kept across JSON.
type value struct {
	T *time.Time `json:"t,omitempty"`
	I *int64     `json:"i,omitempty"`
	F *float64   `json:"f,omitempty"`
	S *string    `json:"s,omitempty"`
}

func (v value) goValue() any {
	switch {
	case v.T != nil:
		return *v.T
	case v.I != nil:
		return *v.I
	case v.F != nil:
		return *v.F
	case v.S != nil:
		return *v.S
	}
	return nil
}

func (v value) String() string { return fmt.Sprint(v.goValue()) }

// compare orders two values of the same column (-1, 0, 1).
func (v value) compare(o value) int {
	switch {
	case v.T != nil && o.T != nil:
		return v.T.Compare(*o.T)
	case v.I != nil && o.I != nil:
		return cmp.Compare(*v.I, *o.I)
	case v.F != nil && o.F != nil:
		return cmp.Compare(*v.F, *o.F)
	case v.S != nil && o.S != nil:
		return strings.Compare(*v.S, *o.S)
	}
	return 0
}

func decodeCursor(b []byte) (*cursor, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if len(c.Columns) == 0 || len(c.Columns) != len(c.Values) {
		return nil, fmt.Errorf("checkpoint: %d columns, %d values", len(c.Columns), len(c.Values))
	}
	return &c, nil
}

func (c *cursor) encode() []byte {
	b, _ := json.Marshal(c) // plain structs: cannot fail
	return b
}

// after orders c before o (the later watermark wins).
func (c *cursor) before(o *cursor) bool {
	for i := range c.Values {
		if r := c.Values[i].compare(o.Values[i]); r != 0 {
			return r < 0
		}
	}
	return false
}

// watermark is the read bound for the next rows. lookback > 0 moves the
// bound back in time to re-read late arrivals: the tie key no longer
// matters there, so the bound becomes inclusive on insert time alone.
func (c *cursor) watermark(lookback time.Duration) *connectors.Watermark {
	if lookback > 0 && c.Values[0].T != nil {
		t := c.Values[0].T.Add(-lookback)
		return &connectors.Watermark{Columns: c.Columns[:1], Values: []any{t}, Inclusive: true}
	}
	w := &connectors.Watermark{Columns: c.Columns, Inclusive: c.Inclusive}
	for _, v := range c.Values {
		w.Values = append(w.Values, v.goValue())
	}
	return w
}

// lastRow reads the cursor of rec's last row; cols index rec's columns in
// cursor order. A NULL insert time or key cannot order rows: it is an
// error the run reports (the import's query must exclude such rows).
func lastRow(rec arrow.RecordBatch, names []string, cols []int, inclusive bool) (*cursor, error) {
	row := int(rec.NumRows()) - 1
	c := &cursor{Columns: names, Values: make([]value, len(cols)), Inclusive: inclusive}
	for i, ci := range cols {
		v, err := valueAt(rec.Column(ci), row)
		if err != nil {
			return nil, fmt.Errorf("watermark column %s: %w", names[i], err)
		}
		c.Values[i] = v
	}
	return c, nil
}

func valueAt(a arrow.Array, i int) (value, error) {
	if a.IsNull(i) {
		return value{}, fmt.Errorf("NULL value; rows with a NULL insert time or key cannot be synced incrementally")
	}
	switch c := a.(type) {
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		t := c.Value(i).ToTime(unit).UTC()
		return value{T: &t}, nil
	case *array.Date32:
		t := c.Value(i).ToTime().UTC()
		return value{T: &t}, nil
	case *array.Date64:
		t := c.Value(i).ToTime().UTC()
		return value{T: &t}, nil
	case *array.Int8:
		return intValue(int64(c.Value(i))), nil
	case *array.Int16:
		return intValue(int64(c.Value(i))), nil
	case *array.Int32:
		return intValue(int64(c.Value(i))), nil
	case *array.Int64:
		return intValue(c.Value(i)), nil
	case *array.Uint8:
		return intValue(int64(c.Value(i))), nil
	case *array.Uint16:
		return intValue(int64(c.Value(i))), nil
	case *array.Uint32:
		return intValue(int64(c.Value(i))), nil
	case *array.Uint64:
		return intValue(int64(c.Value(i))), nil
	case *array.Float32:
		f := float64(c.Value(i))
		return value{F: &f}, nil
	case *array.Float64:
		f := c.Value(i)
		return value{F: &f}, nil
	case *array.String:
		s := strings.Clone(c.Value(i)) // the batch's buffers are reused once it is released
		return value{S: &s}, nil
	case *array.LargeString:
		s := strings.Clone(c.Value(i))
		return value{S: &s}, nil
	case *array.Decimal128:
		// Only whole numbers: a scaled decimal as float64 could round two
		// keys to one and skip a row.
		n := c.Value(i).BigInt()
		if c.DataType().(arrow.DecimalType).GetScale() == 0 && n.IsInt64() {
			return intValue(n.Int64()), nil
		}
	}
	return value{}, fmt.Errorf("type %s cannot order an incremental sync", a.DataType())
}

func intValue(n int64) value { return value{I: &n} }
