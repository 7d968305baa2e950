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

// Ledger entries go in as one Arrow batch and one INSERT … SELECT over an
// Arrow view, like the loader's events: the Appender boxes every value
// and makes a cgo call per value, which made the ledger cost a third of a
// sync's rate (syncbench, 1M rows).

var ledgerSchema = arrow.NewSchema([]arrow.Field{
	{Name: "project", Type: arrow.PrimitiveTypes.Int64},
	{Name: "import", Type: arrow.BinaryTypes.String},
	{Name: "key_hash", Type: arrow.BinaryTypes.Binary},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "run", Type: arrow.BinaryTypes.String},
	{Name: "at_ms", Type: arrow.PrimitiveTypes.Int64},
	{Name: "outcome", Type: arrow.PrimitiveTypes.Uint8},
	{Name: "field", Type: arrow.BinaryTypes.String},
	{Name: "reason", Type: arrow.BinaryTypes.String},
}, nil)

const ledgerView = "ledger_arrow_view"

// appendLedger inserts entries inside conn's transaction.
func appendLedger(ctx context.Context, conn *sql.Conn, project int64, importID string, entries []store.LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, ledgerSchema)
	defer b.Release()
	b.Reserve(len(entries))
	pr := b.Field(0).(*array.Int64Builder)
	im := b.Field(1).(*array.StringBuilder)
	kh := b.Field(2).(*array.BinaryBuilder)
	k := b.Field(3).(*array.StringBuilder)
	run := b.Field(4).(*array.StringBuilder)
	at := b.Field(5).(*array.Int64Builder)
	oc := b.Field(6).(*array.Uint8Builder)
	fd := b.Field(7).(*array.StringBuilder)
	rs := b.Field(8).(*array.StringBuilder)
	for i := range entries {
		e := &entries[i]
		pr.Append(project)
		im.Append(importID)
		kh.Append(e.Hash[:])
		k.Append(e.Key)
		run.Append(e.Run)
		at.Append(e.AtMs)
		oc.Append(uint8(e.Outcome))
		fd.Append(e.Field)
		rs.Append(e.Reason)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(ledgerSchema, []arrow.RecordBatch{rec})
	if err != nil {
		return err
	}
	defer rdr.Release()
	return conn.Raw(func(dc any) error {
		ar, err := duckarrow.New(dc.(driver.Conn))
		if err != nil {
			return fmt.Errorf("arrow interface: %w", err)
		}
		release, err := ar.RegisterView(rdr, ledgerView)
		if err != nil {
			return fmt.Errorf("register arrow view: %w", err)
		}
		defer release()
		ec := dc.(driver.ExecerContext)
		if _, err := ec.ExecContext(ctx, `INSERT INTO sync_ledger SELECT * FROM `+ledgerView, nil); err != nil {
			return err
		}
		_, err = ec.ExecContext(ctx, `DROP VIEW IF EXISTS `+ledgerView, nil)
		return err
	})
}
