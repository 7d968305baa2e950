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
}

// Events validates r's records into batch and returns the refused rows as
// RowErrors (Row offset by rowOffset). The mapper's own row errors are
// returned too, so the result is every row of the batch that failed.
func (v *Validator) Events(project int64, now time.Time, r *Records, rowOffset int64, batch *store.Batch) []RowError {
	v.recs = r.Slices(v.recs[:0])
	opt := record.Options{Project: project, Strict: true, Now: now, Canonical: !v.general, UniqueNames: r.UniqueNames}
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
