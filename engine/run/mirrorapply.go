package run

import (
	"bytes"
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// How a Mirror run applies what its diff found (mirror.go): changed rows
// are staged, then flushed (state first, records second); rows gone from
// the table are removed.

// mirrorFlushRows is how many changed rows a run gathers before it
// applies them: one state transaction and one store write for many
// source batches (on the embedded store each apply that deletes events
// waits for the write log to be loaded and scans the events it deletes).
const mirrorFlushRows = 16384

// stage maps the batch's changed rows into the pending change: their
// state rows, the events they replace and their new records.
func (mr *mirrorRun) stage(ctx context.Context, rec arrow.RecordBatch) error {
	im := mr.im
	refs := make([][]byte, len(mr.changed))
	if mr.pending == nil {
		mr.pending = map[string]struct{}{}
	}
	if mr.table != nil {
		if err := mr.stageLookup(rec, refs); err != nil {
			return err
		}
	} else {
		sub, err := takeRows(rec, mr.changed)
		if err != nil {
			return connectors.Permanent(err)
		}
		defer sub.Release()
		if im.ImportType == importspec.EventStream {
			// An event's properties are the validator's until its next
			// batch; each is copied out at its size, so the pending
			// events hold their bytes alone, not the buffers they were
			// decoded in (a few times as large).
			base := len(mr.batch.Events)
			mr.out.Reset()
			mr.m.Map(sub, &mr.out)
			err = mr.mapEvents(refs)
			for k := base; k < len(mr.batch.Events); k++ {
				mr.batch.Events[k].Props = mr.props.own(mr.batch.Events[k].Props)
			}
		} else {
			// The pending profile updates keep the buffers they were
			// decoded into until the flush: each batch validates into
			// new ones.
			mr.out, mr.pv = mapping.Records{}, mapping.ProfileValidator{}
			mr.m.Map(sub, &mr.out)
			if mr.hist != nil {
				err = mr.hist.stage(refs)
			} else {
				err = mr.mapProfiles(refs)
			}
		}
		if err != nil {
			return err
		}
		// Owned before the write, so the bookkeeping never lags behind.
		if err := mr.track(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	for k, i := range mr.changed {
		key := bytes.Clone(mr.key(i))
		mr.pending[string(key)] = struct{}{}
		mr.rows = append(mr.rows, store.MirrorRow{Key: key, Hash: bytes.Clone(mr.hashes[i][:]), Ref: refs[k], Flag: store.MirrorPending})
		if mr.had[i] {
			mr.replaced++
		}
		mr.lg.stage(key, i, k)
		if im.ImportType == importspec.EventStream {
			if ev, ok := store.ParseEventRef(mr.oldRef[i]); ok {
				mr.delEvs = append(mr.delEvs, ev)
			}
		}
	}
	if len(mr.rows) >= mirrorFlushRows {
		return mr.flush(ctx)
	}
	return nil
}

// flush records the pending rows (state rows, deleted old versions) in
// one transaction, then writes their records.
func (mr *mirrorRun) flush(ctx context.Context) error {
	im := mr.im
	if len(mr.rows) == 0 {
		return nil
	}
	wctx := context.WithoutCancel(ctx) // a change under way is let finish
	if err := mr.hist.save(wctx); err != nil {
		return err
	}
	// ctx, not wctx: the store waits under it (for a loader that may keep
	// failing) and lets its transaction finish; stopping here after the
	// versions were saved is repaired as a crash there is.
	replaced := mr.replaced
	if err := mr.ms.MirrorApply(ctx, store.MirrorApply{Project: im.ProjectID, Import: im.ID, RunID: mr.opt.RunID,
		Gen: mr.gen, Rows: mr.rows, DeleteEvents: mr.delEvs, Replaced: &replaced}); err != nil {
		return connectors.Permanent(err)
	}
	if err := mr.hist.derive(wctx); err != nil {
		return err
	}
	if err := mr.write(wctx); err != nil {
		return err
	}
	if err := mr.lg.done(wctx); err != nil {
		return connectors.Permanent(err)
	}
	mr.rows, mr.delEvs, mr.replaced = mr.rows[:0], mr.delEvs[:0], 0
	mr.props = propArena{}
	clear(mr.pending)
	mr.batch = store.Batch{Project: im.ProjectID, Source: store.SourceWarehouse, RunID: mr.opt.RunID}
	return nil
}

func (mr *mirrorRun) write(ctx context.Context) error {
	if len(mr.batch.Events) == 0 && len(mr.batch.Profiles) == 0 {
		return nil
	}
	res, err := mr.r.Store.Write(ctx, []store.Batch{mr.batch})
	if err != nil {
		return connectors.Permanent(fmt.Errorf("write: %w", err))
	}
	mr.st.Imported += int64(res.Inserted + res.Profiles)
	mr.st.Duplicates += int64(res.Duplicates)
	for _, rj := range res.Rejected {
		mr.fail([]mapping.RowError{{Row: int64(rj.Ref), Message: rj.Err.Error()}})
	}
	return nil
}

// mapEvents validates the changed rows' events into mr.batch and sets
// refs[k] to the event changed row k produced (nil when it was refused).
func (mr *mirrorRun) mapEvents(refs [][]byte) error {
	base := len(mr.batch.Events) // events of earlier batches, pending
	fails := mr.v.Events(mr.im.ProjectID, mr.r.now(), &mr.out, 0, &mr.batch)
	mr.fail(fails)
	mr.lg.refuse(fails)
	refused := make([]bool, len(mr.changed))
	for _, f := range fails[len(mr.out.Errs):] {
		refused[f.Row] = true
	}
	k := base
	for i := range mr.out.Len() {
		row := int(mr.out.Rows[i])
		if refused[row] {
			continue
		}
		if k >= len(mr.batch.Events) {
			return fmt.Errorf("mirror: %d events for more valid rows", len(mr.batch.Events))
		}
		if e := &mr.batch.Events[k]; e.Dedupable() {
			refs[row] = store.EventRef{Key: e.Key, TimeMs: e.TimeMs}.Bytes()
		}
		k++
	}
	if k != len(mr.batch.Events) {
		return fmt.Errorf("mirror: %d events for %d valid rows", len(mr.batch.Events)-base, k-base)
	}
	return nil
}

// mapProfiles validates the changed rows' profile updates into mr.batch:
// each $set is followed by the $unset of the row's NULL properties, and
// a row whose profile id changed first unsets the old profile.
func (mr *mirrorRun) mapProfiles(refs [][]byte) error {
	kind := profile.User
	if mr.im.ImportType == importspec.Groups {
		kind = profile.Group
	}
	for k := range mr.changed {
		if id, ok := mr.m.KeyAt(k); ok {
			refs[k] = []byte(id)
		}
	}
	mr.sets.Profiles = mr.sets.Profiles[:0]
	fails := mr.pv.Profiles(kind, &mr.out, 0, &mr.sets)
	mr.fail(fails)
	mr.lg.refuse(fails)
	for k, i := range mr.changed {
		if old := mr.oldRef[i]; len(old) > 0 {
			if id, _ := parseProfileRef(old); id != string(refs[k]) {
				mr.batch.Profiles = append(mr.batch.Profiles, store.ProfileUpdate{Update: mr.removalOf(kind, old), Ref: k})
			}
		}
	}
	for _, u := range mr.sets.Profiles {
		mr.batch.Profiles = append(mr.batch.Profiles, u)
		mr.markGen++
		for _, p := range u.Props {
			if j, ok := mr.fixedAt[p.Name]; ok {
				mr.mark[j] = mr.markGen
			}
		}
		var null []string
		for j, n := range mr.fixed {
			if mr.mark[j] != mr.markGen {
				null = append(null, n)
			}
		}
		null = append(null, mr.jsonRef(refs, u)...)
		if len(null) > 0 {
			un := profile.Update{Kind: u.Kind, DistinctID: u.DistinctID, GroupKey: u.GroupKey, GroupID: u.GroupID,
				Op: profile.OpUnset, Unset: null, IgnoreTime: true}
			mr.batch.Profiles = append(mr.batch.Profiles, store.ProfileUpdate{Update: un, Ref: u.Ref})
		}
	}
	mr.keepRefusedNames(refs) // mirrorprops.go
	return nil
}

// track records the properties the batch's profile updates set as owned
// by the import (store.Members), so deleting the import's data unsets
// them. Mirror runs never settle ownership: what they own only grows.
func (mr *mirrorRun) track(ctx context.Context) error {
	if len(mr.sets.Profiles) == 0 || mr.table != nil || mr.im.ImportType == importspec.EventStream {
		return nil
	}
	ms := make([]store.Member, 0, len(mr.sets.Profiles))
	for _, u := range mr.sets.Profiles {
		names := make([]string, len(u.Props))
		for i, p := range u.Props {
			names[i] = p.Name
		}
		ms = append(ms, store.Member{MemberKey: memberKey(u.Update), Names: names})
	}
	runID := mr.opt.RunID
	if runID == "" {
		runID = fmt.Sprintf("local-%d", mr.gen) // tracking tells runs apart by id
	}
	if err := mr.r.Store.TrackMembers(ctx, mr.im.ProjectID, mr.im.ID, runID, ms); err != nil {
		return connectors.Permanent(fmt.Errorf("track profiles: %w", err))
	}
	return nil
}

// removal is what a row leaving the table does to its profile: $unset
// of the table's properties, or $delete with delete_profiles.
func (mr *mirrorRun) removal(kind profile.Kind, id string) profile.Update {
	u := profile.Update{Kind: kind, IgnoreTime: true, Op: profile.OpUnset, Unset: mr.fixed}
	if mr.im.DeleteProfiles {
		u.Op, u.Unset = profile.OpDelete, nil
	}
	if kind == profile.Group {
		u.GroupKey, u.GroupID = mr.im.GroupKey, id
	} else {
		u.DistinctID = id
	}
	return u
}

// deletes applies the rows the run did not see: keys gone from the
// table, and deletes a crash left pending.
func (mr *mirrorRun) deletes(ctx context.Context) error {
	rm := mr.newRemover(false)
	err := mr.ms.MirrorUnseen(ctx, mr.im.ProjectID, mr.im.ID, mr.gen, func(row store.MirrorRow) error { return rm.add(ctx, row) })
	if err == nil {
		err = rm.flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("mirror deletes: %w", err)
	}
	return nil
}

// remover applies the removal of rows gone from the table, a batch of
// them at a time.
type remover struct {
	mr    *mirrorRun
	kind  profile.Kind
	batch int // removals applied at a time
	a     store.MirrorApply
	// carry: the run's staged changes (events, none of the removed keys)
	// go with the first apply (mirrorRun.feedDeletes).
	carry bool
}

func (mr *mirrorRun) newRemover(carry bool) *remover {
	rm := &remover{mr: mr, kind: profile.User, batch: unsetBatch, carry: carry}
	switch mr.im.ImportType {
	case importspec.Groups:
		rm.kind = profile.Group
	case importspec.EventStream:
		// An apply costs a scan of the events whatever its size, and an
		// event's removal holds only its key and ref.
		rm.batch = mirrorFlushRows
	}
	rm.reset()
	return rm
}

func (rm *remover) reset() {
	mr, im := rm.mr, rm.mr.im
	// Every row removed was found in the state: each supersedes one.
	rm.a = store.MirrorApply{Project: im.ProjectID, Import: im.ID, RunID: mr.opt.RunID, Gen: mr.gen, Replaced: new(int64)}
	if rm.carry {
		return // the batch holds the staged events that go with the apply
	}
	mr.batch = store.Batch{Project: im.ProjectID, Source: store.SourceWarehouse, RunID: mr.opt.RunID,
		Profiles: mr.batch.Profiles[:0]}
}

func (rm *remover) add(ctx context.Context, row store.MirrorRow) error {
	mr := rm.mr
	mr.st.Deleted++
	*rm.a.Replaced++
	mr.lg.deleted(row.Key)
	switch mr.im.ImportType {
	case importspec.EventStream:
		rm.a.Remove = append(rm.a.Remove, row.Key)
		if ev, ok := store.ParseEventRef(row.Ref); ok {
			rm.a.DeleteEvents = append(rm.a.DeleteEvents, ev)
		}
	case importspec.LookupTable:
		mr.deleteLookup(row.Ref, row.Flag != store.MirrorPending)
		row.Flag = store.MirrorDeleting
		rm.a.Rows = append(rm.a.Rows, row)
	default:
		row.Flag = store.MirrorDeleting
		rm.a.Rows = append(rm.a.Rows, row)
		if mr.hist != nil {
			mr.hist.remove(row.Ref)
		} else if len(row.Ref) > 0 {
			mr.batch.Profiles = append(mr.batch.Profiles, store.ProfileUpdate{Update: mr.removalOf(rm.kind, row.Ref)})
		}
	}
	if len(rm.a.Rows)+len(rm.a.Remove) >= rm.batch {
		return rm.flush(ctx)
	}
	return nil
}

// flush commits the removals: events go with their state rows in one
// transaction; a profile's row stays as a tombstone until the run
// settles, so a crash repeats the $unset instead of losing it.
func (rm *remover) flush(ctx context.Context) error {
	mr := rm.mr
	carried := rm.carry && len(mr.rows) > 0
	if carried {
		rm.a.Rows = append(rm.a.Rows, mr.rows...)
		rm.a.DeleteEvents = append(rm.a.DeleteEvents, mr.delEvs...)
		*rm.a.Replaced += mr.replaced
	}
	if len(rm.a.Rows)+len(rm.a.Remove) == 0 {
		return nil
	}
	wctx := context.WithoutCancel(ctx)
	if err := rm.mr.hist.save(wctx); err != nil {
		return err
	}
	if err := rm.mr.ms.MirrorApply(ctx, rm.a); err != nil { // ctx: see mirrorRun.flush
		return connectors.Permanent(err)
	}
	if err := rm.mr.hist.derive(wctx); err != nil {
		return err
	}
	if err := rm.mr.write(wctx); err != nil {
		return err
	}
	if err := rm.mr.lg.done(wctx); err != nil {
		return connectors.Permanent(err)
	}
	if carried {
		mr.rows, mr.delEvs, mr.replaced = mr.rows[:0], mr.delEvs[:0], 0
		mr.props = propArena{}
		clear(mr.pending)
	}
	rm.carry = false
	rm.reset()
	return nil
}

// takeRows returns rec's rows at idx (ascending) as a new record: its
// runs of consecutive rows, sliced and concatenated.
func takeRows(rec arrow.RecordBatch, idx []int) (arrow.RecordBatch, error) {
	if len(idx) == int(rec.NumRows()) {
		rec.Retain()
		return rec, nil
	}
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for k := 0; k < len(idx); {
		end := k + 1
		for end < len(idx) && idx[end] == idx[end-1]+1 {
			end++
		}
		parts = append(parts, rec.NewSlice(int64(idx[k]), int64(idx[end-1]+1)))
		k = end
	}
	return concatRecords(parts)
}

// propArena holds the pending events' properties: copies packed into
// blocks, dropped whole at the flush.
type propArena struct{ cur []byte }

const propBlock = 256 << 10

// own returns a copy of b in the arena.
func (a *propArena) own(b []byte) []byte {
	if len(b) > propBlock/8 {
		return bytes.Clone(b)
	}
	if cap(a.cur)-len(a.cur) < len(b) {
		a.cur = make([]byte, 0, propBlock)
	}
	n := len(a.cur)
	a.cur = append(a.cur, b...)
	return a.cur[n:len(a.cur):len(a.cur)]
}
