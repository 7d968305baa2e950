package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
)

// ErrHeld ends a run that Options.Preflight refused before it wrote
// anything (a volume anomaly that pauses the import). The run is not a
// failure of the source: the scheduler records it as cancelled.
var ErrHeld = errors.New("run held before writing")

// Plan is what a run knows before it writes: the source's schema and
// how many rows it is about to read. Sync modes that apply changes of
// their own (Mirror) add their planned counts here and call
// Options.Preflight with them before applying.
type Plan struct {
	Import *importspec.Import
	Schema *connectors.Schema
	// SourceRows counts the rows the read will return (the whole table
	// for a full re-read, the rows past the watermark for time_based);
	// -1 when the source cannot count. A function, because a count can
	// cost a warehouse query: only a rule that needs it asks.
	SourceRows func(ctx context.Context) int64
	// Whole: the run reads the whole table (full_sync, one_time, --full,
	// a Mirror run's keyed diff).
	Whole bool
	// Mirror: what a Mirror run is about to insert, update and delete,
	// when its planning pass ran (max_deletes or max_change_ratio set);
	// nil otherwise (mirrorpreflight.go).
	Mirror *MirrorPlan
}

// preflight calls Options.Preflight once per run, before the first write:
// a refusal ends the run for good (a retry would be refused again).
func (p *pass) preflight(ctx context.Context, src connectors.Source, schema *connectors.Schema, req connectors.ReadRequest) error {
	if p.opt.Preflight == nil || p.st.preflighted {
		return nil
	}
	p.st.preflighted = true
	plan := Plan{Import: p.im, Schema: schema, Whole: p.opt.Full || p.im.SyncMode != importspec.TimeBased,
		SourceRows: func(ctx context.Context) int64 {
			c, ok := src.(connectors.Counter)
			if !ok {
				return -1
			}
			n, err := c.Count(ctx, req)
			if err != nil {
				return -1
			}
			if p.st.Total == 0 {
				p.st.Total = n
			}
			return n
		}}
	if err := p.opt.Preflight(ctx, plan); err != nil {
		return connectors.Permanent(fmt.Errorf("%w: %w", ErrHeld, err))
	}
	return nil
}
