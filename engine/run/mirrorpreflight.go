package run

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/connectors"
)

// mirrorPreflight calls Options.Preflight once per Mirror run, before the
// applying pass writes anything. The volume rule sees the table's rows
// (a Mirror run reads them all unless a change feed serves it): a table
// truncated by mistake reads as 0 rows and can hold the run before it
// deletes every record the table produced. With max_deletes or
// max_change_ratio set, the planning pass has counted the changes
// already: the plan carries them and the row count comes from them, with
// no second query.
func (mr *mirrorRun) preflight(ctx context.Context, src connectors.Source) error {
	if mr.opt.Preflight == nil || mr.plan != nil || mr.st.preflighted {
		return nil
	}
	mr.st.preflighted = true
	plan := Plan{Import: mr.im, Schema: mr.schema, Whole: true, Mirror: mr.planned,
		SourceRows: func(ctx context.Context) int64 {
			if p := mr.planned; p != nil {
				return p.Inserts + p.Updates + p.Unchanged
			}
			c, ok := src.(connectors.Counter)
			if !ok {
				return -1
			}
			n, err := c.Count(ctx, connectors.ReadRequest{Table: mr.im.TableParams})
			if err != nil {
				return -1
			}
			return n
		}}
	if err := mr.opt.Preflight(ctx, plan); err != nil {
		return connectors.Permanent(fmt.Errorf("%w: %w", ErrHeld, err))
	}
	return nil
}
