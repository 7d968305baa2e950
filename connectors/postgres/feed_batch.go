package postgres

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/internal/arrowmem"
)

// batcher builds change batches: $op, then the feed's columns decoded by
// Read's appenders, cut at Read's limits of rows and bytes.
type batcher struct {
	rb         *array.RecordBuilder
	op         *array.StringBuilder
	app        []appender
	rows, size int
	batches    int // handed to fn so far
	fn         func(arrow.RecordBatch) error
}

func newBatcher(cols []column, fn func(arrow.RecordBatch) error) *batcher {
	fields := append([]arrow.Field{{Name: connectors.ChangeOpColumn, Type: arrow.BinaryTypes.String}}, schema(cols).Fields()...)
	rb := array.NewRecordBuilder(new(arrowmem.Pool), arrow.NewSchema(fields, nil))
	b := &batcher{rb: rb, op: rb.Field(0).(*array.StringBuilder), fn: fn}
	for i := range cols {
		b.app = append(b.app, bind(&cols[i], rb.Field(i+1)))
	}
	return b
}

func (b *batcher) add(op string, vals [][]byte) error {
	b.op.Append(op)
	for i, v := range vals {
		if err := b.app[i](v); err != nil {
			return err
		}
		b.size += len(v)
	}
	b.rows++
	if b.rows == batchRows || b.size >= batchBytes {
		return b.flush()
	}
	return nil
}

// flush hands the rows built so far to fn; its error is an fnError.
func (b *batcher) flush() error {
	if b.rows == 0 {
		return nil
	}
	rec := b.rb.NewRecordBatch()
	defer rec.Release()
	b.rows, b.size = 0, 0
	b.batches++
	if err := b.fn(rec); err != nil {
		return fnError{err}
	}
	return nil
}

func (b *batcher) release() { b.rb.Release() }

// keepalive parses a primary keepalive message.
func keepalive(msg pgproto3.BackendMessage) (pglogrepl.PrimaryKeepaliveMessage, bool) {
	cd, ok := msg.(*pgproto3.CopyData)
	if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.PrimaryKeepaliveMessageByteID {
		return pglogrepl.PrimaryKeepaliveMessage{}, false
	}
	ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
	return ka, err == nil
}
