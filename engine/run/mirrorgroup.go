package run

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tributary-dev/tributary/connectors"
)

// A change feed hands over its changes in batches of a few thousand rows,
// but what a Mirror run pays per batch does not depend on its size: a
// state lookup and an apply each scan the import's state (and an apply
// that replaces events, the events table), since changes to a table are
// spread over its keys and no zone map can skip them. So the feed's
// consecutive changes of one kind (upserts, deletes) are gathered into
// groups of up to feedGroupRows rows or feedGroupBytes and looked up
// once per group. Commit order is kept: a group ends where the kind
// changes, and within a group a key's last change wins, as within a
// batch.
const (
	feedGroupRows  = 65536
	feedGroupBytes = 16 << 20
)

// feedGroup is the changes gathered so far: retained batches (without
// the $op column), all upserts or all deletes.
type feedGroup struct {
	recs        []arrow.RecordBatch
	del         bool
	rows, bytes int64
}

// group adds rec (the rows of one kind) to the run's feed group, first
// applying the group when rec is of the other kind or would not fit.
func (mr *mirrorRun) group(ctx context.Context, rec arrow.RecordBatch, del bool) error {
	g := &mr.fg
	size := recordBytes(rec)
	if len(g.recs) > 0 && (g.del != del || g.rows+rec.NumRows() > feedGroupRows || g.bytes+size > feedGroupBytes) {
		if err := mr.applyGroup(ctx); err != nil {
			return err
		}
	}
	rec.Retain()
	g.recs = append(g.recs, rec)
	g.del = del
	g.rows += rec.NumRows()
	g.bytes += size
	return nil
}

// applyGroup applies the gathered changes as one batch and empties the
// group; upserts are diffed as rows read are, deletes remove their keys.
func (mr *mirrorRun) applyGroup(ctx context.Context) error {
	g := &mr.fg
	if len(g.recs) == 0 {
		return nil
	}
	rec, err := concatRecords(g.recs)
	for _, r := range g.recs {
		r.Release()
	}
	clear(g.recs)
	g.recs, g.rows, g.bytes = g.recs[:0], 0, 0
	if err != nil {
		return connectors.Permanent(err)
	}
	defer rec.Release()
	if g.del {
		return mr.feedDeletes(ctx, rec)
	}
	return mr.read(ctx, rec)
}

// dropGroup releases a group that will not be applied (the read failed).
func (mr *mirrorRun) dropGroup() {
	for _, r := range mr.fg.recs {
		r.Release()
	}
	mr.fg = feedGroup{}
}

// concatRecords joins batches of one schema into one.
func concatRecords(recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	schema := recs[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	parts := make([]arrow.Array, len(recs))
	var rows int64
	for _, r := range recs {
		if !r.Schema().Equal(schema) {
			return nil, fmt.Errorf("mirror: change batches of different columns: %s and %s", schema, r.Schema())
		}
		rows += r.NumRows()
	}
	for c := range cols {
		for k, r := range recs {
			parts[k] = r.Column(c)
		}
		col, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			for _, done := range cols[:c] {
				done.Release()
			}
			return nil, fmt.Errorf("mirror: concatenate batches: %w", err)
		}
		cols[c] = col
	}
	out := array.NewRecordBatch(schema, cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// recordBytes is the size of the buffers rec's columns reference (a
// slice counts its parent's whole buffers, which it keeps alive).
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
