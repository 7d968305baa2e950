package run

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A Mirror run of a lookup table gathers its changed rows (mr.table, a
// builder of those rows only) and the keys of its deleted ones
// (mr.lkDel), and applies both in one store transaction when it settles
// (store.LookupChanges): readers see the table before or after the run.
// A changed row's state ref is its lookup key, which a delete removes.
// Until the run settles its state rows are pending, so a crash before
// the change is applied repeats it on the next run.

// stageLookup maps rec's changed rows into the run's changed rows and
// sets refs[k] to changed row k's lookup key (nil when it has none).
func (mr *mirrorRun) stageLookup(rec arrow.RecordBatch, refs [][]byte) error {
	sub, err := takeRows(rec, mr.changed)
	if err != nil {
		return connectors.Permanent(err)
	}
	defer sub.Release()
	mr.out.Reset()
	mr.m.Map(sub, &mr.out)
	for k := range mr.changed {
		if key, ok := mr.m.KeyAt(k); ok {
			refs[k] = []byte(key)
		}
	}
	fails, err := mr.pv.Lookup(&mr.out, 0, mr.table)
	if err != nil {
		return connectors.Permanent(fmt.Errorf("lookup table %s: %w", mr.im.LookupTableID, err))
	}
	mr.fail(fails)
	mr.lg.refuse(fails) // Row: the index in changed, as stage expects
	return nil
}

// deleteLookup notes that the row whose state ref is ref left the table.
func (mr *mirrorRun) deleteLookup(ref []byte) {
	if len(ref) > 0 {
		mr.lkDel = append(mr.lkDel, string(ref))
	}
}

// applyLookup applies the run's lookup-table changes, if any.
func (mr *mirrorRun) applyLookup(ctx context.Context) error {
	if mr.table == nil {
		return nil
	}
	t := mr.table.Table()
	if t.Len() == 0 && len(mr.lkDel) == 0 {
		return nil
	}
	lc, ok := mr.r.Store.(store.LookupChanges)
	if !ok {
		return connectors.Permanent(fmt.Errorf("%w: no lookup-table changes", ErrNoMirrorStore))
	}
	if err := lc.ChangeLookup(context.WithoutCancel(ctx), mr.im.ProjectID, mr.im.LookupTableID, t.Batches(), mr.lkDel); err != nil {
		return connectors.Permanent(fmt.Errorf("change lookup table: %w", err))
	}
	return nil
}
