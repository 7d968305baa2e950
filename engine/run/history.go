package run

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// A History import (importspec.HistoryOptions) is a Mirror sync whose
// rows are versions of profiles rather than profiles: the key is
// (profile id, start time) unless key_columns says otherwise, and a
// row's Mirror ref names its version (start, id). A changed row stores
// its version (store.Histories) instead of updating the profile; then
// every profile a flush touched is re-derived from the version current
// now — the one with the latest start ≤ now — with $set of its
// properties and $unset of the table's others, or the removal of a
// row leaving the table when no version is left.
//
// Order of a flush: versions first, then the Mirror state, then the
// profiles. Storing a version is idempotent and the profile
// re-derivation reads only the store, so a crash anywhere is repaired
// by the next run: the state still names the old version (or none), or
// names the new one as pending (re-applied), or marks a delete as
// pending (applied again).
//
// A version whose start is in the future is not stored: Mixpanel drops
// history rows with a future time. Its state row gets an empty hash, so
// every run sees it as changed and stores it once its start is reached.

// histRun is a History import's share of a mirrorRun, for one flush.
type histRun struct {
	mr   *mirrorRun
	kind profile.Kind
	hs   store.Histories
	put  []store.HistoryVersion
	del  []store.HistoryVersion
	ids  []string
	seen map[string]struct{} // ids of this flush: bounded by mirrorFlushRows
	buf  []byte
	p    fastjson.Parser
}

// ErrNoHistoryStore: the store cannot keep History tables' versions.
var ErrNoHistoryStore = errors.New("the store does not support History tables")

func newHistRun(mr *mirrorRun) (*histRun, error) {
	hs, ok := mr.r.Store.(store.Histories)
	if !ok {
		return nil, connectors.Permanent(ErrNoHistoryStore)
	}
	h := &histRun{mr: mr, hs: hs, kind: profile.User, seen: map[string]struct{}{}}
	if mr.im.ImportType == importspec.Groups {
		h.kind = profile.Group
	}
	return h, nil
}

// historyKey is a History table's default Mirror key: profile id, start.
func historyKey(im *importspec.Import) []string {
	id := im.UserColumnName
	switch {
	case im.ImportType == importspec.Groups:
		id = im.GroupIDColumn
	case id == "":
		id = im.DistinctIDColumnName
	}
	return []string{id, im.History.StartTimeColumnName}
}

// histRef is a version's Mirror ref: its start (8 bytes) and profile id.
func histRef(startMs int64, id string) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), uint64(startMs))
	return append(b, id...)
}

func parseHistRef(b []byte) (startMs int64, id string, ok bool) {
	if len(b) < 8 {
		return 0, "", false
	}
	return int64(binary.BigEndian.Uint64(b)), string(b[8:]), true
}

func (h *histRun) groupKey() string {
	if h.kind == profile.Group {
		return h.mr.im.GroupKey
	}
	return ""
}

func (h *histRun) touch(id string) {
	if _, ok := h.seen[id]; !ok {
		h.seen[id] = struct{}{}
		h.ids = append(h.ids, id)
	}
}

// stage turns the batch's mapped changed rows (mr.out, the mapper's
// current batch) into versions, setting refs[k] to changed row k's
// version; a row whose version was replaced by another ref (a changed
// start or id under key_columns) deletes the old version.
func (h *histRun) stage(refs [][]byte) error {
	mr := h.mr
	mr.sets.Profiles = mr.sets.Profiles[:0]
	fails := mr.pv.Profiles(h.kind, &mr.out, 0, &mr.sets)
	mr.fail(fails)
	mr.lg.refuse(fails)
	nowMs := mr.r.now().UnixMilli()
	for _, u := range mr.sets.Profiles {
		k := u.Ref
		i := mr.changed[k]
		start, msg := mr.m.TimeAt(k)
		if msg != "" {
			mr.fail([]mapping.RowError{{Row: int64(i), Message: "history start time: " + msg}})
			// The ledger's Row is the index in changed (mirrorLedger.stage).
			mr.lg.refuse([]mapping.RowError{{Row: int64(k), Field: mr.im.History.StartTimeColumnName, Message: msg}})
			continue
		}
		if start > nowMs {
			mr.hashes[i] = [16]byte{} // never matches: re-examined by every run
			continue
		}
		id := u.DistinctID
		if h.kind == profile.Group {
			id = u.GroupID
		}
		h.buf = append(h.buf[:0], '{')
		for j, p := range u.Props {
			if j > 0 {
				h.buf = append(h.buf, ',')
			}
			h.buf = jsonw.String(h.buf, p.Name)
			h.buf = append(append(h.buf, ':'), p.Value...)
		}
		h.buf = append(h.buf, '}')
		h.put = append(h.put, store.HistoryVersion{GroupKey: h.groupKey(), ID: id, StartMs: start, Props: bytes.Clone(h.buf)})
		refs[k] = histRef(start, id)
		h.touch(id)
	}
	for k, i := range mr.changed {
		old := mr.oldRef[i]
		if len(old) == 0 || bytes.Equal(old, refs[k]) {
			continue
		}
		h.remove(old)
	}
	return nil
}

// remove deletes the version a ref names (a row gone or replaced).
func (h *histRun) remove(ref []byte) {
	start, id, ok := parseHistRef(ref)
	if !ok {
		return
	}
	h.del = append(h.del, store.HistoryVersion{GroupKey: h.groupKey(), ID: id, StartMs: start})
	h.touch(id)
}

// save commits the flush's versions (before the Mirror state); a nil
// h (not a History import) does nothing.
func (h *histRun) save(ctx context.Context) error {
	if h == nil || len(h.put)+len(h.del) == 0 {
		return nil
	}
	mr := h.mr
	if err := h.hs.HistoryApply(ctx, mr.im.ProjectID, mr.im.ID, mr.opt.RunID, h.put, h.del); err != nil {
		return connectors.Permanent(err)
	}
	h.put, h.del = h.put[:0], h.del[:0]
	return nil
}

// derive appends to mr.batch, for every profile the flush touched, the
// updates that make it show its version current now (after the state).
func (h *histRun) derive(ctx context.Context) error {
	if h == nil || len(h.ids) == 0 {
		return nil
	}
	mr := h.mr
	found := make(map[string]struct{}, len(h.ids))
	err := h.hs.HistoryAsOf(ctx, mr.im.ProjectID, mr.im.ID, h.groupKey(), h.ids, mr.r.now().UnixMilli(), func(v store.HistoryVersion) error {
		found[v.ID] = struct{}{}
		return h.current(v)
	})
	if err != nil {
		return connectors.Permanent(err)
	}
	for _, id := range h.ids {
		if _, ok := found[id]; !ok {
			mr.batch.Profiles = append(mr.batch.Profiles, store.ProfileUpdate{Update: mr.removal(h.kind, id)})
		}
	}
	h.ids = h.ids[:0]
	clear(h.seen)
	return nil
}

// current appends the $set of v's properties and the $unset of the
// table's properties v lacks.
func (h *histRun) current(v store.HistoryVersion) error {
	mr := h.mr
	val, err := h.p.ParseBytes(v.Props)
	if err != nil {
		return fmt.Errorf("history version of %s at %d: %w", v.ID, v.StartMs, err)
	}
	obj, err := val.Object()
	if err != nil {
		return fmt.Errorf("history version of %s at %d: %w", v.ID, v.StartMs, err)
	}
	u := profile.Update{Kind: h.kind, Op: profile.OpSet, IgnoreTime: true}
	if h.kind == profile.Group {
		u.GroupKey, u.GroupID = v.GroupKey, v.ID
	} else {
		u.DistinctID = v.ID
	}
	set := u
	mr.markGen++
	obj.Visit(func(k []byte, pv *fastjson.Value) {
		set.Props = append(set.Props, profile.Property{Name: string(k), Value: pv.MarshalTo(nil)})
		if j, ok := mr.fixedAt[string(k)]; ok {
			mr.mark[j] = mr.markGen
		}
	})
	if len(set.Props) > 0 {
		mr.batch.Profiles = append(mr.batch.Profiles, store.ProfileUpdate{Update: set})
	}
	var null []string
	for j, n := range mr.fixed {
		if mr.mark[j] != mr.markGen {
			null = append(null, n)
		}
	}
	if len(null) > 0 {
		un := u
		un.Op, un.Unset = profile.OpUnset, null
		mr.batch.Profiles = append(mr.batch.Profiles, store.ProfileUpdate{Update: un})
	}
	return nil
}
