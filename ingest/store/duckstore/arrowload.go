package duckstore

import (
	"context"
	"fmt"
	"github.com/tributary-dev/tributary/internal/duckarrow"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// The loader hands events to DuckDB as Arrow record batches: columns are
// filled straight from the log entry's bytes and DuckDB inserts a whole
// batch with one INSERT … SELECT over an Arrow view. The Appender's
// AppendRow instead boxes every value in a driver.Value, copies each
// string twice and makes one cgo call per value (measured: loader
// throughput 254k → 355k events/s on one core).
//
// The columns are plain Go slices kept for the life of the store and
// wrapped as Arrow buffers without copying; arrow-go's builders were
// measured to spend a fifth of the loader's Go time zero-filling and
// regrowing fresh buffers for every batch. Reuse is safe because DuckDB
// copies the rows into its own storage during the INSERT, and the view and
// the exported stream are released before the next batch is built.

// RowGroupRows is the rows of one DuckDB row group.
const RowGroupRows = 122_880

const (
	// arrowChunkRows is the size of one Arrow batch and INSERT: DuckDB's
	// row group, so each INSERT fills whole row groups.
	arrowChunkRows = RowGroupRows
	// arrowChunkBytes also ends a batch: it bounds the loader's memory
	// (events may carry up to 1 MB of properties each) and keeps string
	// offsets far from the int32 limit of Arrow's string type. It is the
	// default and the ceiling of Options.LoadChunkBytes, which a small
	// memory budget lowers: a row group of typical events is ~55 MB.
	arrowChunkBytes = 256 << 20
)

// loadView is the connection-local name of the Arrow view of one chunk.
const loadView = "tributary_load_events"

// eventSchema mirrors the events table column for column, so the INSERT
// can select * from the view.
var eventSchema = arrow.NewSchema([]arrow.Field{
	{Name: "project", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "distinct_id", Type: arrow.BinaryTypes.String},
	{Name: "time_ms", Type: arrow.PrimitiveTypes.Int64},
	{Name: "insert_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "props", Type: arrow.BinaryTypes.String},
	{Name: "ingest_ms", Type: arrow.PrimitiveTypes.Int64},
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k_hi", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "k_lo", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "common", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

const insertSQL = `INSERT INTO events SELECT * FROM ` + loadView

// strCol is an Arrow string column: offsets[i]..offsets[i+1] is row i.
type strCol struct {
	offsets []int32
	data    []byte
}

func (c *strCol) reset() {
	c.offsets = append(c.offsets[:0], 0)
	if c.data == nil {
		c.data = make([]byte, 0, 4096) // never a nil data buffer for C
	}
	c.data = c.data[:0]
}

// add appends b as row rows of a chunk that ends at maxBytes of strings.
func (c *strCol) add(b []byte, rows, maxBytes int) {
	if len(c.data)+len(b) > cap(c.data) {
		c.grow(len(b), rows, maxBytes)
	}
	c.data = append(c.data, b...)
	c.offsets = append(c.offsets, int32(len(c.data)))
}

// projectAfter is how many rows grow waits for before it sizes a column
// by their average.
const projectAfter = 1024

// grow makes room for n more bytes, at least doubling the buffer (append
// alone grows a large slice by a quarter at a time: filling a fresh
// store's first chunk, ~100 MB of properties, copied ~4× its bytes). Once
// projectAfter rows are in, it sizes the buffer for a whole chunk at
// their average (within maxBytes), so the column is allocated about once
// instead of at every size on the way: doubling from a small buffer
// allocates twice the final size in all, and every new page costs a
// fault the first time it is written (~10 µs on a paravirtualised
// machine; a fresh store's loader allocated ~240 MB of columns per
// 200,000-event BenchmarkMigration run, store=fresh).
func (c *strCol) grow(n, rows, maxBytes int) {
	size := max(2*cap(c.data), len(c.data)+n)
	if rows >= projectAfter {
		whole := (len(c.data) + n) / rows * arrowChunkRows
		size = max(size, min(whole+whole/8, maxBytes+n))
	}
	d := make([]byte, len(c.data), size)
	copy(d, c.data)
	c.data = d
}

// eventChunk accumulates log events column-wise. The loader alone uses it.
type eventChunk struct {
	project, timeMs, ingestMs, seq, hi, lo []int64
	name, distinctID, insertID, props      strCol
	// keyed is the validity bitmap of insert_id, k_hi and k_lo (an event
	// has all three or none); nulls counts the unset bits.
	keyed  []byte
	nulls  int
	common []int64 // common_props id; 0 with its bit unset in hasCommon
	// hasCommon is the validity bitmap of common; commonNulls counts its
	// unset bits.
	hasCommon   []byte
	commonNulls int
	rows        int
	bytes       int // string bytes so far
	maxBytes    int // full at this many string bytes
}

func newEventChunk(maxBytes int) *eventChunk {
	c := &eventChunk{maxBytes: maxBytes}
	c.reset()
	return c
}

func (c *eventChunk) reset() {
	c.project, c.timeMs, c.ingestMs, c.seq = c.project[:0], c.timeMs[:0], c.ingestMs[:0], c.seq[:0]
	c.hi, c.lo = c.hi[:0], c.lo[:0]
	c.name.reset()
	c.distinctID.reset()
	c.insertID.reset()
	c.props.reset()
	c.keyed = c.keyed[:0]
	c.nulls, c.rows, c.bytes = 0, 0, 0
	c.common, c.hasCommon, c.commonNulls = c.common[:0], c.hasCommon[:0], 0
}

// add appends e; common is its common_props id, 0 for none.
func (c *eventChunk) add(e *logEvent, common int64) {
	if c.rows%8 == 0 {
		c.keyed = append(c.keyed, 0)
		c.hasCommon = append(c.hasCommon, 0)
	}
	c.common = append(c.common, common)
	if common != 0 {
		c.hasCommon[c.rows/8] |= 1 << (c.rows % 8)
	} else {
		c.commonNulls++
	}
	c.project = append(c.project, e.project)
	c.name.add(e.name, c.rows, c.maxBytes)
	c.distinctID.add(e.distinctID, c.rows, c.maxBytes)
	c.timeMs = append(c.timeMs, e.timeMs)
	c.insertID.add(e.insertID, c.rows, c.maxBytes) // empty when null: offsets stay monotonic
	if len(e.insertID) > 0 {
		c.keyed[c.rows/8] |= 1 << (c.rows % 8)
	} else {
		c.nulls++
	}
	c.hi = append(c.hi, e.hi)
	c.lo = append(c.lo, e.lo)
	c.props.add(e.props, c.rows, c.maxBytes)
	c.ingestMs = append(c.ingestMs, e.ingestMs)
	c.seq = append(c.seq, e.seq)
	c.rows++
	c.bytes += len(e.name) + len(e.distinctID) + len(e.insertID) + len(e.props)
}

func (c *eventChunk) full() bool { return c.rows >= arrowChunkRows || c.bytes >= c.maxBytes }

// discard drops the accumulated rows (after a failed load).
func (c *eventChunk) discard() { c.reset() }

// record wraps the columns, without copying, as a record batch that is
// valid until the next reset.
func (c *eventChunk) record() arrow.RecordBatch {
	n := c.rows
	var valid, validCommon *memory.Buffer
	if c.nulls > 0 {
		valid = memory.NewBufferBytes(c.keyed)
	}
	if c.commonNulls > 0 {
		validCommon = memory.NewBufferBytes(c.hasCommon)
	}
	i64 := func(v []int64, valid *memory.Buffer, nulls int) arrow.Array {
		d := array.NewData(arrow.PrimitiveTypes.Int64, n,
			[]*memory.Buffer{valid, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))}, nil, nulls, 0)
		defer d.Release()
		return array.NewInt64Data(d)
	}
	str := func(s *strCol, valid *memory.Buffer, nulls int) arrow.Array {
		d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{valid,
			memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(s.offsets)), memory.NewBufferBytes(s.data)}, nil, nulls, 0)
		defer d.Release()
		return array.NewStringData(d)
	}
	cols := []arrow.Array{
		i64(c.project, nil, 0), str(&c.name, nil, 0), str(&c.distinctID, nil, 0), i64(c.timeMs, nil, 0),
		str(&c.insertID, valid, c.nulls), str(&c.props, nil, 0), i64(c.ingestMs, nil, 0), i64(c.seq, nil, 0),
		i64(c.hi, valid, c.nulls), i64(c.lo, valid, c.nulls), i64(c.common, validCommon, c.commonNulls),
	}
	rec := array.NewRecordBatch(eventSchema, cols, int64(n))
	for _, a := range cols {
		a.Release() // the record holds its own references
	}
	return rec
}

// insert appends the accumulated rows to the events table inside the
// transaction open on conn, then resets the chunk. The view is dropped and
// the stream released before returning, so DuckDB holds no pointer into
// the columns when they are reused.
func (c *eventChunk) insert(ctx context.Context, conn *duckdb.Conn, ar *duckarrow.Arrow) error {
	if c.rows == 0 {
		return nil
	}
	defer c.reset()
	rec := c.record()
	defer rec.Release()
	rdr, err := array.NewRecordReader(eventSchema, []arrow.RecordBatch{rec})
	if err != nil {
		return fmt.Errorf("arrow reader: %w", err)
	}
	defer rdr.Release()
	release, err := ar.RegisterView(rdr, loadView)
	if err != nil {
		return fmt.Errorf("register arrow view: %w", err)
	}
	defer release()
	if _, err := conn.ExecContext(ctx, insertSQL, nil); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `DROP VIEW IF EXISTS `+loadView, nil); err != nil {
		return fmt.Errorf("drop arrow view: %w", err)
	}
	return nil
}
