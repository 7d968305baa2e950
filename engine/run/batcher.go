package run

import (
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// pipelineSlots is how many batches are on their way at once: one being
// mapped on the connector's goroutine, one validated, one written (its
// log entry fsynced). Reading, validating and the durable write each
// take a similar share of a row's cost, and the write mostly waits on
// the disk, so overlapping them is what lets a sync use two cores.
const pipelineSlots = 3

// slot is one batch on its way: the mapped records, the store batch
// validated from them, and what the run's stats learn from it. Each slot
// owns its buffers (the validator's decoder reuses them), so a slot is
// reused only once its write returned.
type slot struct {
	out    mapping.Records
	v      mapping.Validator
	pv     mapping.ProfileValidator
	batch  store.Batch
	offset int64 // rows read before this batch: failures' row numbers
	rows   int64
	fails  []mapping.RowError
	err    error // validation failed (pipeline only)
	// rec is the batch as read, kept until validation when the run keeps
	// a ledger, so refused rows can be quarantined as read (ledger.go).
	rec  arrow.RecordBatch
	quar []store.QuarantineRow
	// keys are the rows' primary key values, evRows each kept event's
	// row (ledger_key.go); refRows is evRows' scratch.
	keys            rowKeys
	evRows, refRows []int32
}

// reader is the part of a connectors.Source a batcher reads through (a
// replay reads quarantined rows the same way).
type reader interface {
	Read(ctx context.Context, req connectors.ReadRequest, fn func(arrow.RecordBatch) error) error
}

// batcher reads one pass's rows and moves them through map → validate →
// write. Batches are written strictly in read order, so the checkpoint
// committed with each covers exactly the rows written so far.
type batcher struct {
	p      *pass
	schema *connectors.Schema
	table  *lookup.Builder // lookup tables: rows gather here, nothing is written
	m      *mapping.Mapper
	base   int64 // rows read by earlier passes of the run: failures number rows across it
	seen   int64 // rows mapped so far in this pass
	// pk are the primary key's columns in the rows read, found at the
	// first batch when the run keeps a ledger (nil: keyed by $insert_id).
	pk      []int
	pkFound bool
}

// read runs the pass's read. Imports whose batches carry side effects
// ordered with their mapping (full-sync ownership, lookup tables) run
// each batch through all stages on the connector's goroutine; the others
// are pipelined.
func (b *batcher) read(ctx context.Context, src reader, req connectors.ReadRequest) error {
	if b.p.own != nil || b.table != nil {
		var s slot
		return src.Read(ctx, req, func(rec arrow.RecordBatch) error {
			if ok, err := b.mapBatch(rec, &s); !ok || err != nil {
				return err
			}
			if err := b.check(&s); err != nil {
				return err
			}
			return b.commit(ctx, &s)
		})
	}
	return b.pipeline(ctx, src, req)
}

func (b *batcher) pipeline(ctx context.Context, src reader, req connectors.ReadRequest) error {
	free := make(chan *slot, pipelineSlots)
	for range pipelineSlots {
		free <- new(slot)
	}
	toCheck, toWrite := make(chan *slot, pipelineSlots), make(chan *slot, pipelineSlots)
	// stopped ends the read once a batch failed: nothing after it may be
	// written, or its checkpoint would skip that batch. A cancelled ctx
	// ends the read too, but the batches in flight are still written.
	stopped, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var failed error // the writer's alone until wg.Wait
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(toWrite)
		for s := range toCheck {
			s.err = b.check(s)
			toWrite <- s
		}
	})
	wg.Go(func() {
		for s := range toWrite {
			if failed == nil {
				if failed = s.err; failed == nil {
					failed = b.commit(ctx, s)
				}
				if failed != nil {
					stop(failed)
				}
			}
			free <- s
		}
	})
	readErr := src.Read(ctx, req, func(rec arrow.RecordBatch) error {
		var s *slot
		select {
		case s = <-free:
		case <-stopped.Done():
			return context.Cause(stopped)
		}
		ok, err := b.mapBatch(rec, s)
		if !ok || err != nil {
			free <- s
			return err
		}
		toCheck <- s
		return nil
	})
	close(toCheck)
	wg.Wait()
	if failed != nil {
		return failed
	}
	return readErr
}

// mapBatch maps rec into s on the connector's goroutine, which owns rec
// only for the call; ok is false for an empty batch.
func (b *batcher) mapBatch(rec arrow.RecordBatch, s *slot) (ok bool, err error) {
	p := b.p
	im := p.im
	if b.m == nil {
		if b.m, err = mapping.New(mapping.Options{Import: im, Project: p.project, RunID: p.opt.RunID, Schema: b.schema, CommonTags: true}, rec.Schema()); err != nil {
			return false, connectors.Permanent(err)
		}
	}
	if rec.NumRows() == 0 {
		return false, nil
	}
	s.out.Reset()
	b.m.Map(rec, &s.out)
	s.batch = store.Batch{Project: im.ProjectID, Source: store.SourceWarehouse, RunID: p.opt.RunID,
		Events: s.batch.Events[:0], Profiles: s.batch.Profiles[:0]}
	if err := p.advance(rec, &s.batch); err != nil {
		return false, err
	}
	s.offset, s.rows = b.seen, rec.NumRows()
	b.seen += s.rows
	if p.ledger != nil {
		rec.Retain()
		s.rec = rec
		if !b.pkFound {
			b.pk, b.pkFound = pkColumns(b.schema.PrimaryKey, rec.Schema()), true
		}
		if s.keys.cols = b.pk; b.pk != nil {
			s.keys.fill(rec)
		}
	}
	return true, nil
}

// check validates s's records into its store batch exactly as the
// ingestion API would.
func (b *batcher) check(s *slot) error {
	im := b.p.im
	base := b.base
	switch im.ImportType {
	case importspec.People:
		s.fails = s.pv.Profiles(profile.User, &s.out, base+s.offset, &s.batch)
	case importspec.Groups:
		s.fails = s.pv.Profiles(profile.Group, &s.out, base+s.offset, &s.batch)
	case importspec.LookupTable:
		var err error
		if s.fails, err = s.pv.Lookup(&s.out, base+s.offset, b.table); err != nil {
			b.keepRefused(s)
			return connectors.Permanent(fmt.Errorf("lookup table %s: %w", im.LookupTableID, err))
		}
	default:
		// The slot keeps s.out until its write returned, and nothing
		// reads its records as JSON after this (commit counts bytes,
		// eventRows reads rows), so the events may borrow their bytes.
		s.v.Lend = true
		s.fails = s.v.Events(im.ProjectID, b.p.r.now(), &s.out, base+s.offset, &s.batch)
	}
	b.keepRefused(s)
	return nil
}

// commit writes s durably and accounts for it; only this stage touches
// the run's stats while a pipeline runs.
func (b *batcher) commit(ctx context.Context, s *slot) error {
	p := b.p
	if p.own != nil {
		p.own.prepare(b.m, &s.out, s.fails, &s.batch)
		// Committed before the batch, so the bookkeeping never lags
		// behind the profiles; like the write, it is let finish.
		if err := p.own.track(context.WithoutCancel(ctx)); err != nil {
			return connectors.Permanent(err)
		}
	}
	st := p.st
	st.RowsRead += s.rows
	st.Bytes += int64(len(s.out.Buf))
	p.fail(s.fails...)
	if p.ledger != nil {
		p.ledger.refused(s.fails, b.base+s.offset, &s.keys, s.quar)
		s.quar = nil
	}
	if len(s.batch.Events) > 0 || len(s.batch.Profiles) > 0 || s.batch.Checkpoint != nil {
		res, err := p.write(ctx, &s.batch)
		if err != nil {
			return err
		}
		if p.ledger != nil && len(s.batch.Events) > 0 {
			p.ledger.events(&s.batch, res, &s.keys, s.evRows)
		}
		if p.ledger != nil && len(s.batch.Profiles) > 0 {
			p.ledger.profiles(&s.batch, res, &s.keys, b.base+s.offset)
		}
	}
	if p.ledger != nil && b.table != nil {
		p.ledger.lookups(&s.out, s.fails, &s.keys, b.base+s.offset)
	}
	if err := p.ledger.flush(ctx, false); err != nil {
		return connectors.Permanent(err)
	}
	if p.opt.Progress != nil {
		st.Duration = p.r.now().Sub(st.Started)
		p.opt.Progress(*st)
	}
	return nil
}

// keepRefused quarantines s's refused rows from the batch as read and
// lets the batch go.
func (b *batcher) keepRefused(s *slot) {
	if s.rec == nil {
		return
	}
	first := b.base + s.offset
	if s.keys.cols != nil {
		s.evRows, s.refRows = eventRows(s.evRows, &s.out, s.fails, first, s.refRows)
	}
	if len(s.fails) > 0 {
		p := b.p
		s.quar = quarantine(s.rec, first, s.fails, &s.keys, p.opt.RunID, p.st.Started.UnixMilli())
	}
	s.rec.Release()
	s.rec = nil
}
