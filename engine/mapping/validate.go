package mapping

import (
	"time"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Validator runs mapped events through the same strict validator as
// POST /import. Reuse one per goroutine: it keeps the decoder's buffers.
type Validator struct {
	dec  record.Decoder
	recs [][]byte
	// general turns the decoder's one-pass path for canonical records
	// off, for the oracle test and the benchmark's comparison; unvouched
	// keeps it but ignores the mapper's vouching (Records.Vouched).
	general, unvouched bool
	// Lend lets the events' Props be the records' own bytes instead of a
	// copy (record.Options.Lend): the caller keeps r unchanged until the
	// batch is written and does not read r's records as JSON afterwards
	// (one-pass records are rewritten in place). A sync's batcher does:
	// the copy was a third of the live heap a slot holds and its pages.
	Lend bool
}

// Events validates r's records into batch and returns the refused rows as
// RowErrors (Row offset by rowOffset). The mapper's own row errors are
// returned too, so the result is every row of the batch that failed.
func (v *Validator) Events(project int64, now time.Time, r *Records, rowOffset int64, batch *store.Batch) []RowError {
	v.recs = r.Slices(v.recs[:0])
	opt := record.Options{Project: project, Strict: true, Now: now, Canonical: !v.general, UniqueNames: r.UniqueNames, Lend: v.Lend}
	if !v.unvouched && len(r.Vouched) == r.Len() {
		opt.Vouched = r.Vouched
	}
	if r.Common != nil {
		batch.Common, opt.CommonProps = r.Common, len(runTagNames)
	}
	fails := v.dec.Decode(opt, v.recs, batch)
	errs := make([]RowError, 0, len(r.Errs)+len(fails))
	for _, e := range r.Errs {
		e.Row += rowOffset
		errs = append(errs, e)
	}
	for _, f := range fails {
		errs = append(errs, RowError{
			Row:     int64(r.Rows[f.Index]) + rowOffset,
			Key:     string(r.Key(f.Index)),
			Field:   f.Field,
			Message: f.Message,
		})
	}
	return errs
}
