package run

import (
	"bytes"
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
// A changed row's state ref is its lookup key (then, until the change
// settles, the keys it replaced: cutLookupRef), which a delete removes.
// The Mirror key (key_columns, the primary key) may differ from the
// lookup key, so an update can move a row to another lookup key (its old
// one is deleted) and a key can pass from a deleted row to another row
// in one run (it is upserted, so not deleted: applyLookup). Of two rows
// changed in one run with one lookup key the first is kept and the
// second refused (lookup.Builder), as a replacement refuses it.
// Until the run settles its state rows are pending, so a crash before
// the change is applied repeats it on the next run.

// stageLookup maps rec's changed rows into the run's changed rows and
// sets refs[k] to changed row k's lookup key and the old keys it deletes.
// A refused row keeps its old ref: its previous version stays in the
// table.
func (mr *mirrorRun) stageLookup(rec arrow.RecordBatch, refs [][]byte) error {
	sub, err := takeRows(rec, mr.changed)
	if err != nil {
		return connectors.Permanent(err)
	}
	defer sub.Release()
	mr.out.Reset()
	mr.m.Map(sub, &mr.out)
	fails, err := mr.pv.Lookup(&mr.out, 0, mr.table)
	if err != nil {
		return connectors.Permanent(fmt.Errorf("lookup table %s: %w", mr.im.LookupTableID, err))
	}
	var refused []bool // by index in changed; only when some row was
	if len(fails) > 0 {
		refused = make([]bool, len(mr.changed))
		for _, f := range fails {
			if f.Row >= 0 && f.Row < int64(len(refused)) {
				refused[f.Row] = true
			}
		}
	}
	for k, i := range mr.changed {
		old := mr.oldRef[i]
		if refused != nil && refused[k] {
			refs[k] = old
			continue
		}
		key, _ := mr.m.KeyAt(k) // not blank: the Builder refuses that
		ref := []byte(key)
		for len(old) > 0 {
			var gone []byte
			gone, old = cutLookupRef(old)
			if len(gone) > 0 && string(gone) != key {
				mr.lkDel = append(mr.lkDel, string(gone)) // the row's lookup key changed
				ref = append(append(ref, 0), gone...)
			}
		}
		refs[k] = ref
	}
	mr.fail(fails)
	mr.lg.refuse(fails) // Row: the index in changed, as stage expects
	return nil
}

// A row whose lookup key changed keeps its old keys in its state ref,
// after its key and each after a NUL (which no lookup key holds): a run
// that fails before its change is applied leaves the row pending with
// them, and the next run removes them. Once settled they are ignored
// (classify strips them), as another row may take such a key later.
func cutLookupRef(ref []byte) (key, rest []byte) {
	if i := bytes.IndexByte(ref, 0); i >= 0 {
		return ref[:i], ref[i+1:]
	}
	return ref, nil
}

// lookupRefKey returns the lookup key of a settled row's state ref.
func lookupRefKey(ref []byte) []byte {
	key, _ := cutLookupRef(ref)
	return key
}

// deleteLookup notes that the row whose state ref is ref left the table:
// its key and, when its change is not settled, the keys it replaced.
func (mr *mirrorRun) deleteLookup(ref []byte, settled bool) {
	if settled {
		ref = lookupRefKey(ref)
	}
	for len(ref) > 0 {
		var key []byte
		key, ref = cutLookupRef(ref)
		if len(key) > 0 {
			mr.lkDel = append(mr.lkDel, string(key))
		}
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
	// A key upserted is not deleted (store.LookupChanges): another row
	// took it in this run, from a row deleted or moved to another key.
	del := mr.lkDel[:0]
	for _, key := range mr.lkDel {
		if _, up := t.Lookup(key); !up {
			del = append(del, key)
		}
	}
	mr.lkDel = del
	if t.Len() == 0 && len(del) == 0 {
		return nil
	}
	if err := lc.ChangeLookup(context.WithoutCancel(ctx), mr.im.ProjectID, mr.im.LookupTableID, t.Batches(), del); err != nil {
		return connectors.Permanent(fmt.Errorf("change lookup table: %w", err))
	}
	return nil
}
