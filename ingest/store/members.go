package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tributary-dev/tributary/ingest/profile"
)

// A full_sync people or groups import replaces what it wrote with exactly
// what its table holds. To know what it wrote, it "owns" the properties
// it set: per (project, import, profile) the store keeps the names the
// import's latest run set, plus the names earlier runs set that no run
// has settled yet. At the end of a successful run the import unsets what
// it owns but no longer sets, and forgets profiles absent from the table
// (after unsetting everything it owned on them). Properties set by
// anything else (/engage, another import) are never touched.
//
// The bookkeeping is crash-safe: a run that dies before it settles leaves
// its names and every earlier unsettled name in place, so the next
// successful run still unsets what the dead one and its predecessors set.

// MemberKey names one profile an import writes: a user profile by the
// distinct_id the import wrote to (resolved through identity when
// updated, as the import's own updates are), or a group profile.
type MemberKey struct {
	Kind     profile.Kind
	GroupKey string // groups only; "" for user profiles
	ID       string
}

// Member is what one run did to one profile.
type Member struct {
	MemberKey
	Names []string // the properties the run set
	// Keep: the profile's row is in the table but its update was refused
	// (a bad value, the property limit). Everything the import owned on
	// the profile stays owned, so a bad row never empties a profile.
	Keep bool
}

// StaleMember is a profile and the owned properties a run must unset.
type StaleMember struct {
	MemberKey
	Names []string
}

// Members is the ownership bookkeeping of people and groups imports
// (only full_sync runs settle it). Calls for one import come from one run
// at a time.
type Members interface {
	// TrackMembers records that run runID set ms. It is durable on
	// return; a run calls it before it writes the updates it describes,
	// so the bookkeeping never lags behind the profiles.
	TrackMembers(ctx context.Context, project int64, importID, runID string, ms []Member) error
	// StaleMembers streams, in key order, every profile of the import
	// with owned properties run runID did not set (every owned property
	// of a profile the run did not track). A runID no run used ("")
	// selects everything the import owns. Memory does not grow with the
	// number of profiles; fn may write to the store.
	StaleMembers(ctx context.Context, project int64, importID, runID string, fn func(StaleMember) error) error
	// SettleMembers makes runID's names the import's only owned ones:
	// profiles the run did not track are forgotten. Call it after the
	// stale properties are unset; until then a crash loses nothing.
	SettleMembers(ctx context.Context, project int64, importID, runID string) error
}

// MemberState is the bookkeeping row of one (project, import, profile),
// which both stores keep with the same rules (Track, Stale).
type MemberState struct {
	RunID string   // the last run that tracked the profile
	Names []string // what RunID set: sorted, unique
	// Prev is what earlier runs set, RunID did not, and no run has settled
	// since: owned until a run that ends well unsets it. Sorted, unique.
	Prev []string
}

// Track returns the state after run runID tracks m on top of st (the zero
// state for a profile never tracked). ok is false when there is nothing
// to keep (a refused row of a profile the import never owned).
func (st MemberState) Track(runID string, m Member) (next MemberState, ok bool) {
	next.RunID = runID
	var names []string
	if st.RunID == runID {
		// The run met the profile again (a repeated key, or a retry
		// re-reading the table): it owns the union.
		next.Prev = st.Prev
		names = append(names, st.Names...)
	} else {
		// Prev keeps everything not yet settled: if st's run died before
		// settling, its predecessors' names are still on the profile.
		next.Prev = union(st.Names, st.Prev)
	}
	names = append(names, m.Names...)
	if m.Keep {
		names = append(names, next.Prev...)
	}
	next.Names = union(names, nil)
	// What the run sets again is owned through Names; Prev keeps only the
	// rest, so a profile with nothing stale has an empty Prev, which
	// stores skip when they look for stale profiles.
	next.Prev = minus(next.Prev, next.Names)
	return next, len(next.Names) > 0 || len(next.Prev) > 0
}

// Stale returns the owned properties that run runID must unset.
func (st MemberState) Stale(runID string) []string {
	if st.RunID != runID {
		return union(st.Names, st.Prev)
	}
	return minus(st.Prev, st.Names)
}

// minus returns the names of sorted a that are not in sorted b.
func minus(a, b []string) []string {
	var out []string
	for _, n := range a {
		if _, found := slices.BinarySearch(b, n); !found {
			out = append(out, n)
		}
	}
	return out
}

// union returns the sorted, unique names of a and b.
func union(a, b []string) []string {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make([]string, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// MergeMembers folds repeated keys of ms into one Member each (names
// united, Keep if any was), in first-seen order, so a store can apply a
// call as one upsert per profile.
func MergeMembers(ms []Member) []Member {
	at := make(map[MemberKey]int, len(ms))
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		i, ok := at[m.MemberKey]
		if !ok {
			at[m.MemberKey] = len(out)
			out = append(out, Member{MemberKey: m.MemberKey, Names: slices.Clone(m.Names), Keep: m.Keep})
			continue
		}
		out[i].Names = append(out[i].Names, m.Names...)
		out[i].Keep = out[i].Keep || m.Keep
	}
	return out
}

// EncodeNames is how stores keep a name list: a JSON array of strings.
func EncodeNames(names []string) string {
	if len(names) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(names) // strings only: cannot fail
	return string(b)
}

// DecodeNames reads EncodeNames' text.
func DecodeNames(s string) ([]string, error) {
	var names []string
	if err := json.Unmarshal([]byte(s), &names); err != nil {
		return nil, fmt.Errorf("stored property names: %w", err)
	}
	return names, nil
}

// ScanMember reads a member row selected as (kind, group_key, id, run_id,
// names, prev_names), for a store's StaleMembers.
func ScanMember(scan func(dest ...any) error) (MemberKey, MemberState, error) {
	var k MemberKey
	var st MemberState
	var kind int64
	var names, prev string
	if err := scan(&kind, &k.GroupKey, &k.ID, &st.RunID, &names, &prev); err != nil {
		return k, st, err
	}
	k.Kind = profile.Kind(kind)
	var err error
	if st.Names, err = DecodeNames(names); err == nil {
		st.Prev, err = DecodeNames(prev)
	}
	if err != nil {
		return k, st, fmt.Errorf("profile %q: %w", k.ID, err)
	}
	return k, st, nil
}

// EmitStale calls fn for each member of a page that runID leaves with
// stale names.
func EmitStale(keys []MemberKey, states []MemberState, runID string, fn func(StaleMember) error) error {
	for i, st := range states {
		if names := st.Stale(runID); len(names) > 0 {
			if err := fn(StaleMember{MemberKey: keys[i], Names: names}); err != nil {
				return err
			}
		}
	}
	return nil
}
