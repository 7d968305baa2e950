package run

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A people or groups run tracks the properties each row set (store.Members)
// before it writes the batch, so the import knows what it owns: deleting
// the import's data unsets exactly that (ReleaseProfiles). A full_sync run
// also replaces what the import wrote with exactly what the table holds:
//
//   - a row's NULL column unsets that property (a $unset beside the
//     row's $set, which cannot carry both operations);
//   - at the end of a run that succeeded, what the import owns but no
//     longer sets is unset: keys gone from a JSON column on profiles still
//     in the table, and everything it owned on profiles no longer in the
//     table (they keep every other property and are never deleted); then
//     the run settles the bookkeeping.
//
// A row refused by the mapper, the validator or the store keeps what the
// import owned on its profile: one bad value must not empty a profile.
// Other modes never settle, so what they own only grows.

// unsetBatch is how many $unset updates the end pass writes at a time.
const unsetBatch = 500

// ownership is one profile run's bookkeeping, shared by its passes.
type ownership struct {
	st      Store
	project int64
	im      *importspec.Import
	runID   string // the tracking id: the run's, or a fresh one
	replace bool   // full_sync: unset NULL columns, and the stale at the end

	planned *mapping.Mapper // the mapper fixed was taken from
	fixed   []string        // the mapper's fixed names, truncated as the parser truncates
	fixedAt map[string]int  // name → index in fixed
	mark    []uint32        // mark[i] == gen: fixed[i] was set by the row at hand
	gen     uint32

	members []store.Member
	keys    map[int]store.MemberKey // Ref → profile, to keep a rejected row's
	spare   []store.ProfileUpdate   // the other buffer of batch.Profiles
	unsets  int                     // $unset updates in the batch being written
}

// newOwnership returns the bookkeeping for im's run, nil when im is not a
// people or groups import.
func newOwnership(st Store, im *importspec.Import, runID string, now time.Time) *ownership {
	if im.ImportType != importspec.People && im.ImportType != importspec.Groups {
		return nil
	}
	if runID == "" {
		// Tracking tells runs apart by id; an anonymous run gets its own.
		runID = "local-" + strconv.FormatInt(now.UnixNano(), 36)
	}
	return &ownership{st: st, project: im.ProjectID, im: im, runID: runID, replace: im.SyncMode == importspec.FullSync,
		keys: map[int]store.MemberKey{}}
}

// prepare collects what to track: every parsed row, and the rows the
// mapper (out.Errs) or the parser (fails after them) refused. In a
// full_sync run it follows each $set with the $unset of the row's NULL
// fixed columns.
func (f *ownership) prepare(m *mapping.Mapper, out *mapping.Records, fails []mapping.RowError, batch *store.Batch) {
	if f.replace && f.planned != m {
		// Once per mapper: a retry's pass plans the schema afresh.
		f.planned, f.fixed = m, f.fixed[:0]
		f.fixedAt = map[string]int{}
		for _, n := range m.FixedNames() {
			n = truncateName(n)
			if _, dup := f.fixedAt[n]; !dup {
				f.fixedAt[n] = len(f.fixed)
				f.fixed = append(f.fixed, n)
			}
		}
		f.mark = make([]uint32, len(f.fixed))
	}
	f.members, f.unsets = f.members[:0], 0
	clear(f.keys)
	next := f.spare[:0]
	for _, u := range batch.Profiles {
		next = append(next, u)
		f.gen++
		names := make([]string, len(u.Props))
		for i, pr := range u.Props {
			names[i] = pr.Name
			if j, ok := f.fixedAt[pr.Name]; ok {
				f.mark[j] = f.gen
			}
		}
		if f.replace {
			if null := f.nullNames(); len(null) > 0 {
				un := profile.Update{Kind: u.Kind, DistinctID: u.DistinctID, GroupKey: u.GroupKey, GroupID: u.GroupID,
					Op: profile.OpUnset, Unset: null, IgnoreTime: true}
				next = append(next, store.ProfileUpdate{Update: un, Ref: u.Ref})
				f.unsets++
			}
		}
		k := memberKey(u.Update)
		f.keys[u.Ref] = k
		f.members = append(f.members, store.Member{MemberKey: k, Names: names})
	}
	f.spare, batch.Profiles = batch.Profiles, next
	for _, e := range out.Errs {
		if id, ok := m.KeyAt(int(e.Row)); ok {
			f.keep(id)
		}
	}
	for _, e := range fails[len(out.Errs):] {
		// The parser's failures carry the key as the record's JSON text.
		var id string
		if e.Key != "" && json.Unmarshal([]byte(`"`+e.Key+`"`), &id) == nil && id != "" {
			f.keep(id)
		}
	}
}

// nullNames returns the fixed names the row at hand (f.gen) did not set.
func (f *ownership) nullNames() []string {
	var null []string
	for j, n := range f.fixed {
		if f.mark[j] != f.gen {
			null = append(null, n)
		}
	}
	return null
}

func (f *ownership) keep(id string) {
	k := store.MemberKey{Kind: profile.User, ID: id}
	if f.im.ImportType == importspec.Groups {
		k = store.MemberKey{Kind: profile.Group, GroupKey: f.im.GroupKey, ID: id}
	}
	f.members = append(f.members, store.Member{MemberKey: k, Keep: true})
}

func memberKey(u profile.Update) store.MemberKey {
	if u.Kind == profile.Group {
		return store.MemberKey{Kind: profile.Group, GroupKey: u.GroupKey, ID: u.GroupID}
	}
	return store.MemberKey{Kind: profile.User, ID: u.DistinctID}
}

// track commits what prepare collected; the batch's write comes after.
func (f *ownership) track(ctx context.Context) error {
	if len(f.members) == 0 {
		return nil
	}
	if err := f.st.TrackMembers(ctx, f.project, f.im.ID, f.runID, f.members); err != nil {
		return fmt.Errorf("track profiles: %w", err)
	}
	return nil
}

// rejected keeps what the import owned on the profiles of rows the store
// refused (their $set did not apply).
func (f *ownership) rejected(ctx context.Context, rjs []store.Rejection) error {
	var ms []store.Member
	for _, rj := range rjs {
		if k, ok := f.keys[rj.Ref]; ok {
			ms = append(ms, store.Member{MemberKey: k, Keep: true})
		}
	}
	if len(ms) == 0 {
		return nil
	}
	if err := f.st.TrackMembers(ctx, f.project, f.im.ID, f.runID, ms); err != nil {
		return fmt.Errorf("track refused profiles: %w", err)
	}
	return nil
}

// finish is the end pass of a full_sync run that succeeded: unset what
// the import owns and no longer sets, then settle. A crash before the
// settle only means the next run unsets the same names again. Other
// modes keep what they own.
func (f *ownership) finish(ctx context.Context) (profiles int, err error) {
	if !f.replace {
		return 0, nil
	}
	return unsetStale(ctx, f.st, f.project, f.im.ID, f.runID)
}

// ReleaseProfiles unsets every property a people or groups import owns
// on every profile and forgets them: the import's share of a data
// deletion. It is safe to repeat after a failure.
func ReleaseProfiles(ctx context.Context, st Store, project int64, importID string) (profiles int, err error) {
	return unsetStale(ctx, st, project, importID, "")
}

// unsetStale writes the stale members of runID as $unset updates,
// unsetBatch at a time through the normal write path, then settles.
func unsetStale(ctx context.Context, st Store, project int64, importID, runID string) (int, error) {
	var ups []store.ProfileUpdate
	n := 0
	flush := func() error {
		if len(ups) == 0 {
			return nil
		}
		// Like a run's batches, a write in flight is let finish.
		if _, err := st.Write(context.WithoutCancel(ctx), []store.Batch{{Project: project, Profiles: ups, RunID: runID}}); err != nil {
			return fmt.Errorf("unset properties: %w", err)
		}
		n += len(ups)
		ups = ups[:0]
		return nil
	}
	err := st.StaleMembers(ctx, project, importID, runID, func(m store.StaleMember) error {
		u := profile.Update{Kind: m.Kind, Op: profile.OpUnset, Unset: m.Names, IgnoreTime: true}
		if m.Kind == profile.Group {
			u.GroupKey, u.GroupID = m.GroupKey, m.ID
		} else {
			u.DistinctID = m.ID
		}
		if ups = append(ups, store.ProfileUpdate{Update: u}); len(ups) == unsetBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, fmt.Errorf("release stale properties: %w", err)
	}
	if err := st.SettleMembers(ctx, project, importID, runID); err != nil {
		return n, fmt.Errorf("release stale properties: %w", err)
	}
	return n, nil
}

// truncateName cuts a name to profile.MaxNameRunes runes, as the profile
// parser does with every name it reads, so fixed names compare with parsed ones.
func truncateName(s string) string {
	if len(s) <= profile.MaxNameRunes || utf8.RuneCountInString(s) <= profile.MaxNameRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == profile.MaxNameRunes {
			return s[:i]
		}
		n++
	}
	return s
}
