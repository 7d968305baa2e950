package run

import (
	"context"

	"github.com/tributary-dev/tributary/connectors"
)

// expect sets the rows a Mirror run's full read is expected to return
// (Stats.Total), so the console and the CLI show its progress and ETA as
// for other runs (Options.Count). The planning pass's count is exact;
// else a source that can count (DuckDB, Postgres) is asked, one COUNT as
// for other runs; else the state's size (the table's keys after the
// previous run) is taken from the store. A run served by a change feed
// reads only the changes, whose number nothing tells beforehand: it has
// no total.
func (mr *mirrorRun) expect(ctx context.Context, src connectors.Source) {
	if !mr.opt.Count || mr.plan != nil || mr.st.Total > 0 {
		return
	}
	if p := mr.planned; p != nil {
		mr.st.Total = p.Inserts + p.Updates + p.Unchanged
		return
	}
	if c, ok := src.(connectors.Counter); ok {
		if n, err := c.Count(ctx, connectors.ReadRequest{Table: mr.im.TableParams}); err == nil {
			mr.st.Total = n
			return
		}
	}
	if n, err := mr.ms.MirrorCount(ctx, mr.im.ProjectID, mr.im.ID); err == nil {
		mr.st.Total = n
	}
}
