package run

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/store"
)

// pass is one attempt at a run: connect, read from the committed
// watermark, write. A retry starts a new pass from what was committed.
type pass struct {
	r       *Runner
	im      *importspec.Import
	project importspec.Project
	opt     Options
	st      *Stats

	// time_based state: cursor column names, their indexes in the Arrow
	// schema (found at the first batch), and the watermark so far.
	curNames  []string
	curIdx    []int
	inclusive bool
	cur       *cursor
	committed bool // a batch of this pass is durable

	own *ownership // people and groups: what the run owns (fullsync.go)

	ledger *ledger // nil: the store keeps none (ledger.go)
}

func (p *pass) run(ctx context.Context) error {
	im := p.im
	src, err := p.r.Registry.Open(ctx, im.SourceConfig())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer src.Close()
	schema, err := src.Discover(ctx, im.TableParams)
	if err != nil {
		return fmt.Errorf("discover: %w", err)
	}
	if err := im.CheckSchema(schema); err != nil {
		return connectors.Permanent(err)
	}
	req := connectors.ReadRequest{Table: im.TableParams}
	if im.SyncMode == importspec.TimeBased {
		if err := p.planIncremental(ctx, schema, &req); err != nil {
			return err
		}
	}
	if p.opt.Count && p.st.Total == 0 {
		if c, ok := src.(connectors.Counter); ok {
			if n, err := c.Count(ctx, req); err == nil {
				p.st.Total = n
			}
		}
	}
	if err := p.preflight(ctx, src, schema, req); err != nil {
		return err
	}
	var table *lookup.Builder
	if im.ImportType == importspec.LookupTable {
		cols := []string{im.PropertyKeyColumnName}
		for _, c := range schema.Columns {
			if c.Name != im.PropertyKeyColumnName {
				cols = append(cols, c.Name)
			}
		}
		table = lookup.NewBuilder(cols, lookup.Options{})
	}
	b := &batcher{p: p, schema: schema, table: table, base: p.st.RowsRead}
	err = b.read(ctx, src, req)
	// What was written is in the ledger even when the pass failed.
	if lerr := p.ledger.flush(ctx, true); lerr != nil && err == nil {
		err = connectors.Permanent(lerr)
	}
	if err != nil {
		return err
	}
	if table != nil {
		// A lookup table is replaced whole, once every row is read.
		if err := p.r.Store.ReplaceLookup(ctx, im.ProjectID, im.LookupTableID, table.Table().Batches()); err != nil {
			return connectors.Permanent(fmt.Errorf("replace lookup table: %w", err))
		}
		p.st.Imported = int64(table.Table().Len())
		p.ledger.release()
		if err := p.ledger.flush(ctx, true); err != nil {
			return connectors.Permanent(err)
		}
	}
	return nil
}

// write commits one batch durably, in read order: a crash loses only
// batches in flight, whose watermarks were not committed either.
// The write ignores cancellation so a shutdown lets the batch in flight
// (and its checkpoint) commit instead of abandoning it half-way.
func (p *pass) write(ctx context.Context, batch *store.Batch) (store.WriteResult, error) {
	res, err := p.r.Store.Write(context.WithoutCancel(ctx), []store.Batch{*batch})
	if err != nil {
		// The store, not the source, failed: retrying the source won't help.
		return res, connectors.Permanent(fmt.Errorf("write: %w", err))
	}
	p.committed = true
	st := p.st
	st.Imported += int64(res.Inserted + res.Profiles)
	st.Duplicates += int64(res.Duplicates)
	if p.own != nil {
		// A NULL column's $unset rides beside its row's $set: one record.
		st.Imported -= int64(p.own.unsets)
		if err := p.own.rejected(context.WithoutCancel(ctx), res.Rejected); err != nil {
			return res, connectors.Permanent(err)
		}
	}
	for _, rj := range res.Rejected {
		p.fail(mapping.RowError{Row: int64(rj.Ref), Message: rj.Err.Error()})
	}
	return res, nil
}

func (p *pass) fail(errs ...mapping.RowError) {
	p.st.Failed += int64(len(errs))
	for _, f := range errs {
		if len(p.st.Failures) < maxFailures {
			p.st.Failures = append(p.st.Failures, f)
		}
	}
}

// planIncremental orders the read by (insert time, tie key) and starts it
// past the committed watermark. The tie key is the table's primary key,
// else the insert-id column; without either, ties are re-read inclusively.
func (p *pass) planIncremental(ctx context.Context, schema *connectors.Schema, req *connectors.ReadRequest) error {
	im := p.im
	names := []string{im.InsertTimeColumnName}
	key := schema.PrimaryKey
	if len(key) == 0 && im.InsertIDColumnName != "" {
		key = []string{im.InsertIDColumnName}
	}
	for _, k := range key {
		if k != im.InsertTimeColumnName {
			names = append(names, k)
		}
	}
	p.curNames, p.inclusive = names, len(names) == 1
	req.OrderBy = names
	if p.opt.Full {
		return nil // read everything; the watermark is rebuilt from the rows
	}
	ck, err := p.r.Store.Checkpoint(ctx, im.ProjectID, im.ID)
	if err != nil {
		return connectors.Permanent(fmt.Errorf("read checkpoint: %w", err))
	}
	if p.cur, err = decodeCursor(ck); err != nil {
		return connectors.Permanent(err)
	}
	if p.cur == nil {
		return nil
	}
	if !slices.Equal(p.cur.Columns, names) {
		// The key changed (a new primary key, another insert-id column):
		// keep the insert time only, inclusively, so no row is skipped.
		p.cur = &cursor{Columns: names[:1], Values: p.cur.Values[:1], Inclusive: true}
	}
	req.After = p.cur.watermark(im.LookbackDuration())
	return nil
}

// advance sets batch's checkpoint to the watermark after rec's last row
// (time_based only). With a lookback the first rows re-read lie before
// the committed watermark, which never moves back.
func (p *pass) advance(rec arrow.RecordBatch, batch *store.Batch) error {
	if p.curNames == nil {
		return nil
	}
	if p.curIdx == nil {
		for _, n := range p.curNames {
			idx := rec.Schema().FieldIndices(n)
			if len(idx) == 0 {
				return connectors.Permanent(fmt.Errorf("watermark column %s is not in the rows read", n))
			}
			p.curIdx = append(p.curIdx, idx[0])
		}
	}
	last, err := lastRow(rec, p.curNames, p.curIdx, p.inclusive)
	if err != nil {
		return connectors.Permanent(err)
	}
	if p.cur == nil || len(p.cur.Columns) != len(last.Columns) || p.cur.before(last) {
		p.cur = last
	}
	batch.Checkpoint = &store.Checkpoint{Import: p.im.ID, Value: p.cur.encode()}
	return nil
}
