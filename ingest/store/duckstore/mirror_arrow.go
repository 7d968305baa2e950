package duckstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/duckarrow"
)

// A Mirror run's key lists and state rows go into DuckDB as Arrow views
// on the statement's own connection, like the loader's events: bound as
// lists of hex strings they cost a first Mirror run ~15 % of its CPU in
// the driver (a boxed value and a cgo call per element), and DuckDB more
// to decode them.

var (
	mirrorKeysSchema = arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.Binary}}, nil)
	mirrorRowsSchema = arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.Binary},
		{Name: "hash", Type: arrow.BinaryTypes.Binary},
		{Name: "ref", Type: arrow.BinaryTypes.Binary},
		{Name: "flag", Type: arrow.PrimitiveTypes.Uint8},
	}, nil)
)

// The views' names; each lives on one connection while a call holds it.
const (
	mirrorKeysView = "mirror_keys_arrow"
	mirrorRowsView = "mirror_rows_arrow"
)

func mirrorKeysBatch(keys [][]byte) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, mirrorKeysSchema)
	defer b.Release()
	kb := b.Field(0).(*array.BinaryBuilder)
	kb.Reserve(len(keys))
	for _, k := range keys {
		kb.Append(k)
	}
	return b.NewRecordBatch()
}

// mirrorRowsBatch holds rows and a tombstone (mirrorGone) for each key
// of removed.
func mirrorRowsBatch(rows []store.MirrorRow, removed [][]byte) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, mirrorRowsSchema)
	defer b.Release()
	b.Reserve(len(rows) + len(removed))
	kb, hb, rb := b.Field(0).(*array.BinaryBuilder), b.Field(1).(*array.BinaryBuilder), b.Field(2).(*array.BinaryBuilder)
	fb := b.Field(3).(*array.Uint8Builder)
	for _, r := range rows {
		kb.Append(r.Key)
		hb.Append(r.Hash)
		rb.Append(nonNil(r.Ref))
		fb.Append(uint8(r.Flag))
	}
	for _, k := range removed {
		kb.Append(k)
		hb.Append([]byte{})
		rb.Append([]byte{})
		fb.Append(mirrorGone)
	}
	return b.NewRecordBatch()
}

// registerView registers rec as the view name on conn until the returned
// release is called (which drops the view and frees rec).
func registerView(ctx context.Context, conn *sql.Conn, rec arrow.RecordBatch, name string) (release func(), err error) {
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		rec.Release()
		return nil, err
	}
	var unregister func()
	err = conn.Raw(func(dc any) error {
		ar, err := duckarrow.New(dc.(driver.Conn))
		if err != nil {
			return fmt.Errorf("arrow interface: %w", err)
		}
		unregister, err = ar.RegisterView(rdr, name)
		if err != nil {
			return fmt.Errorf("register arrow view: %w", err)
		}
		return nil
	})
	if err != nil {
		rdr.Release()
		rec.Release()
		return nil, err
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `DROP VIEW IF EXISTS `+name)
		unregister()
		rdr.Release()
		rec.Release()
	}, nil
}
