package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A write changes profiles in memory (loading each once, with one query
// for the likely set up front) and stores the final state of each profile
// it touched at the end. It holds the identity lock of every project whose
// profiles it changes, so no other write changes them in between.

type profileKey struct {
	project  int64
	kind     profile.Kind
	groupKey string // "" for users
	id       string
}

type profileSet struct {
	m     map[profileKey]*profile.Profile // loaded or changed; zero Profile = absent
	dirty []profileKey                    // changed, each once, to store
	isDir map[profileKey]bool
}

// profileMove asks applyMoves to fold old's user profile into canonical's.
type profileMove struct {
	project        int64
	old, canonical string
}

// userKey is where a user update lands: the canonical id of its
// distinct_id, or the literal id with $ignore_alias.
func (w *writeTx) profileKeyOf(project int64, u *store.ProfileUpdate) (profileKey, error) {
	switch u.Kind {
	case profile.User:
		id := u.DistinctID
		if !u.IgnoreAlias {
			id = w.graphs[project].pg.g.Resolve(id)
		}
		return profileKey{project: project, kind: profile.User, id: id}, nil
	case profile.Group:
		return profileKey{project: project, kind: profile.Group, groupKey: u.GroupKey, id: u.GroupID}, nil
	}
	return profileKey{}, fmt.Errorf("unknown profile kind %v", u.Kind)
}

// prefetchProfiles loads, in one query, the profiles the write's updates
// name as identity stands before the write. Merges within the write may send
// an update elsewhere; load fetches those one by one.
func (w *writeTx) prefetchProfiles(ctx context.Context, batches []store.Batch) error {
	var (
		ps    []int64
		kinds []int16
		gks   []string
		ids   []string
	)
	add := func(k profileKey) {
		if _, ok := w.prof.m[k]; ok {
			return
		}
		w.prof.m[k] = &profile.Profile{}
		ps, kinds, gks, ids = append(ps, k.project), append(kinds, int16(k.kind)), append(gks, k.groupKey), append(ids, k.id)
	}
	for bi := range batches {
		b := &batches[bi]
		for i := range b.Profiles {
			u := &b.Profiles[i]
			k, err := w.profileKeyOf(b.Project, u)
			if err != nil {
				continue // rejected when applied
			}
			add(k)
			if u.Kind == profile.User && k.id != u.DistinctID {
				add(profileKey{project: b.Project, kind: profile.User, id: u.DistinctID})
			}
		}
	}
	if len(ps) == 0 {
		return nil
	}
	rows, err := w.tx.Query(ctx, `SELECT p.project, p.kind, p.group_key, p.id, p.props FROM profiles p
		JOIN unnest($1::int8[], $2::int2[], $3::text[], $4::text[]) AS k(project, kind, group_key, id)
		ON p.project = k.project AND p.kind = k.kind AND p.group_key = k.group_key AND p.id = k.id`, ps, kinds, gks, ids)
	if err != nil {
		return fmt.Errorf("read profiles: %w", err)
	}
	var (
		k     profileKey
		kind  int16
		props []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&k.project, &kind, &k.groupKey, &k.id, &props}, func() error {
		k.kind = profile.Kind(kind)
		p := &profile.Profile{}
		if err := p.UnmarshalJSON(props); err != nil {
			return fmt.Errorf("stored profile %q: %w", k.id, err)
		}
		w.prof.m[k] = p
		return nil
	})
	if err != nil {
		return fmt.Errorf("read profiles: %w", err)
	}
	return nil
}

// loadProfile returns k's state in this write, reading it if not yet known.
func (w *writeTx) loadProfile(ctx context.Context, k profileKey) (*profile.Profile, error) {
	if p, ok := w.prof.m[k]; ok {
		return p, nil
	}
	p := &profile.Profile{}
	var props []byte
	err := w.tx.QueryRow(ctx, `SELECT props FROM profiles WHERE project = $1 AND kind = $2 AND group_key = $3 AND id = $4`,
		k.project, int16(k.kind), k.groupKey, k.id).Scan(&props)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("read profile: %w", err)
	default:
		if err := p.UnmarshalJSON(props); err != nil {
			return nil, fmt.Errorf("stored profile %q: %w", k.id, err)
		}
	}
	w.prof.m[k] = p
	return p, nil
}

func (w *writeTx) keepProfile(k profileKey, p *profile.Profile) {
	w.prof.m[k] = p
	if !w.prof.isDir[k] {
		w.prof.isDir[k] = true
		w.prof.dirty = append(w.prof.dirty, k)
	}
}

// applyProfile applies one update. A profile error (an operator the kind
// does not support, the property limit) rejects the update; a storage error
// fails the whole write.
func (w *writeTx) applyProfile(ctx context.Context, project int64, u *store.ProfileUpdate) (rejected, err error) {
	k, kerr := w.profileKeyOf(project, u)
	if kerr != nil {
		return kerr, nil
	}
	p, err := w.loadProfile(ctx, k)
	if err != nil {
		return nil, err
	}
	// Apply is all or nothing, so p is unchanged when it refuses.
	if err := profile.Apply(p, u.Update, w.now); err != nil {
		return err, nil
	}
	w.keepProfile(k, p)
	return nil, nil
}

// applyMoves folds the profiles of ids that lost their canonical role into
// the new canonical profile, whose own values win, and deletes them. If the
// result would break the property limit both stay as they are (reads show
// the canonical one).
func (w *writeTx) applyMoves(ctx context.Context) error {
	moves := w.ident.moves
	w.ident.moves = moves[:0]
	for _, mv := range moves {
		ok := profileKey{project: mv.project, kind: profile.User, id: mv.old}
		nk := profileKey{project: mv.project, kind: profile.User, id: mv.canonical}
		op, err := w.loadProfile(ctx, ok)
		if err != nil {
			return err
		}
		if !op.Exists() {
			continue
		}
		np, err := w.loadProfile(ctx, nk)
		if err != nil {
			return err
		}
		u := profile.Update{Kind: profile.User, Op: profile.OpSetOnce, IgnoreTime: true}
		for name, v := range op.All() {
			u.Props = append(u.Props, profile.Property{Name: name, Value: v})
		}
		if err := profile.Apply(np, u, w.now); err != nil {
			w.s.log.Warn("pgstore: profiles not merged after an identity merge", "project", mv.project, "from", mv.old, "to", mv.canonical, "err", err)
			continue
		}
		w.keepProfile(nk, np)
		w.keepProfile(ok, &profile.Profile{})
	}
	return nil
}

// flushProfiles stores the final state of every profile the write changed.
func (w *writeTx) flushProfiles(ctx context.Context) error {
	if len(w.prof.dirty) == 0 {
		return nil
	}
	var up, del struct {
		ps    []int64
		kinds []int16
		gks   []string
		ids   []string
		props []string
	}
	for _, k := range w.prof.dirty {
		t := &del
		p := w.prof.m[k]
		if p.Exists() {
			t = &up
			t.props = append(t.props, string(p.AppendJSON(nil)))
		}
		t.ps, t.kinds, t.gks, t.ids = append(t.ps, k.project), append(t.kinds, int16(k.kind)), append(t.gks, k.groupKey), append(t.ids, k.id)
	}
	var b pgx.Batch
	if len(up.ps) > 0 {
		b.Queue(`INSERT INTO profiles (project, kind, group_key, id, props, updated_ms)
			SELECT project, kind, group_key, id, props, $6 FROM unnest($1::int8[], $2::int2[], $3::text[], $4::text[], $5::text[])
				AS t(project, kind, group_key, id, props)
			ON CONFLICT (project, kind, group_key, id) DO UPDATE SET props = excluded.props, updated_ms = excluded.updated_ms`,
			up.ps, up.kinds, up.gks, up.ids, up.props, w.now)
	}
	if len(del.ps) > 0 {
		b.Queue(`DELETE FROM profiles p USING unnest($1::int8[], $2::int2[], $3::text[], $4::text[]) AS d(project, kind, group_key, id)
			WHERE p.project = d.project AND p.kind = d.kind AND p.group_key = d.group_key AND p.id = d.id`,
			del.ps, del.kinds, del.gks, del.ids)
	}
	if err := w.tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("store profiles: %w", err)
	}
	return nil
}

// ScanProfiles implements store.Profiles, a page at a time in id order, so
// stopping early costs at most one page. A
// user profile stored under an id that is no longer its cluster's canonical
// id (a device profile after the device was linked, which Mixpanel does not
// carry over; a literal $ignore_alias profile) is not shown.
func (s *Store) ScanProfiles(ctx context.Context, q store.ProfileScan, fn func(*store.StoredProfile) error) error {
	if err := s.enter("scan profiles"); err != nil {
		return err
	}
	defer s.ops.Done()
	where := `p.project = $1 AND p.kind = $2 AND p.group_key = $3`
	args := []any{q.Project, int16(q.Kind), ""}
	if q.Kind == profile.Group {
		args[2] = q.GroupKey
	}
	if len(q.IDs) > 0 {
		args = append(args, q.IDs)
		where += fmt.Sprintf(` AND p.id = ANY($%d::text[])`, len(args))
	}
	if q.Kind == profile.User {
		where += ` AND NOT EXISTS (SELECT 1 FROM identity_ids i WHERE i.project = p.project AND i.id = p.id AND i.canonical <> p.id)`
	}
	const cols = `SELECT p.id, p.props, p.updated_ms FROM profiles p WHERE `
	limit := fmt.Sprintf(` ORDER BY p.id LIMIT %d`, s.pages.profiles)
	first := cols + where + limit
	next := cols + where + fmt.Sprintf(` AND p.id > $%d`, len(args)+1) + limit
	var sp store.StoredProfile
	for page, pageArgs := first, args; ; page, pageArgs = next, append(args[:len(args):len(args)], sp.ID) {
		rows, err := s.pool.Query(ctx, page, pageArgs...)
		if err != nil {
			return fmt.Errorf("pgstore: scan profiles: %w", err)
		}
		n := 0
		for rows.Next() {
			// Props stay in the driver's buffer: valid until the next row.
			if err := rows.Scan(&sp.ID, nil, &sp.UpdatedMs); err != nil {
				rows.Close()
				return fmt.Errorf("pgstore: scan profiles: %w", err)
			}
			sp.Props = rows.RawValues()[1]
			n++
			if err := fn(&sp); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pgstore: scan profiles: %w", err)
		}
		if n < s.pages.profiles {
			return nil
		}
	}
}
