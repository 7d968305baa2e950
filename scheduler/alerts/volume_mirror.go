package alerts

import (
	"context"

	"github.com/tributary-dev/tributary/ingest/store"
)

// A Mirror run's rows read are the table's rows when it diffs the whole
// table, but only the changes when a change feed serves it (Postgres):
// medians of those mix two measures, and a run of 5 changes against a
// median of 100,000 rows would look like a truncated table. So a Mirror
// import's volume is the table's rows: before a run, the source's count
// (or the planning pass's), as for any import (run.Plan.SourceRows);
// for past runs and after a run, the rows its state held when it ended
// (store.MirrorCounts.Rows). Runs saved without that figure (0, or -1
// when the run could not tell) are left out of the median, and a run that
// could not tell is not judged after it ends.

// mirrorCounts reads Mirror runs' counts (store.Mirrors).
type mirrorCounts interface {
	MirrorRunCounts(ctx context.Context, project int64, runIDs []string) (map[string]store.MirrorCounts, error)
}

// volumes returns the last 30 successful runs' volumes (replays, which
// read the quarantine, left out) and the volume to judge: rows, or after
// a Mirror run its table's rows. ok is false when the import's volumes
// cannot be told.
func (w *watch) volumes(ctx context.Context, runs []store.Run, rows int64, before bool) (vols []int64, judged int64, ok bool) {
	past := func(r store.Run) bool {
		return r.Status == store.RunSucceeded && r.ID != w.run.ID && r.Trigger != "replay"
	}
	if !w.im.IsMirror() {
		for _, r := range runs {
			if past(r) {
				vols = append(vols, r.RowsRead)
				if len(vols) == 30 {
					break
				}
			}
		}
		return vols, rows, true
	}
	mc, ok := w.m.st.(mirrorCounts)
	if !ok {
		return nil, 0, false
	}
	ids := []string{w.run.ID}
	for _, r := range runs {
		if past(r) {
			ids = append(ids, r.ID)
		}
	}
	counts, err := mc.MirrorRunCounts(ctx, w.im.ProjectID, ids)
	if err != nil {
		w.m.log.Warn("alerts: reading mirror run counts", "import", w.im.ID, "err", err)
		return nil, 0, false
	}
	for _, id := range ids[1:] {
		if c := counts[id]; c.Rows > 0 {
			vols = append(vols, c.Rows)
			if len(vols) == 30 {
				break
			}
		}
	}
	if !before {
		c, saved := counts[w.run.ID]
		if !saved || c.Rows < 0 {
			return nil, 0, false
		}
		rows = c.Rows
	}
	return vols, rows, true
}
