package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Profiles are read, changed and logged by writes (under the writer lock)
// and upserted into the profiles table by the loader. Between the two, the
// newest state of a profile lives in pendingProfiles, so a write never
// reads a table row that an earlier acknowledged write already replaced.

type profileKey struct {
	project  int64
	kind     profile.Kind
	groupKey string
	id       string
}

// profileState is a profile's complete state after a write: deleted, or
// its properties.
type profileState struct {
	deleted   bool
	props     []byte // compact JSON object
	updatedMs int64
}

type pendingProfile struct {
	lsn   uint64
	state profileState
}

type pendingProfiles struct {
	mu sync.Mutex
	m  map[profileKey]pendingProfile
	// stored holds the projects whose rows the profiles table may hold:
	// those it held at Open and those the loader wrote since, marked
	// before their states leave m. A write to any other project has
	// nothing to read from the table: a migration into a new project
	// spent 90-150 ms of its 5,000 profiles' 120-340 ms asking it
	// (BenchmarkMigration, users=5000).
	stored map[int64]bool
}

// markStored notes that the table may now hold rows of project.
func (pp *pendingProfiles) markStored(project int64) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.stored[project] = true
}

// mayHold reports whether the table may hold rows of project.
func (pp *pendingProfiles) mayHold(project int64) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.stored[project]
}

// release forgets states the tables now hold (the loader applied lsn).
func (pp *pendingProfiles) release(lsn uint64) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for k, p := range pp.m {
		if p.lsn <= lsn {
			delete(pp.m, k)
		}
	}
}

// profileRow is a state to log; dirty maps keys to it within one write.
type profileRow struct {
	key   profileKey
	p     *profile.Profile
	state profileState
}

// loadProfile returns the newest state of k for a write: this write's own,
// then the pending one, then the table's.
func (s *Store) loadProfile(ctx context.Context, k profileKey) (*profile.Profile, error) {
	sc := &s.scratch
	if i, ok := sc.dirty[k]; ok {
		return sc.profiles[i].p, nil
	}
	p := &profile.Profile{}
	s.pending.mu.Lock()
	pend, ok := s.pending.m[k]
	s.pending.mu.Unlock()
	var props []byte
	fetchedProps, fetched := sc.fetched[k]
	switch {
	case ok && !pend.state.deleted:
		props = pend.state.props
	case !ok && fetched:
		// Read ahead by prefetchProfiles, when k was not pending; only
		// this writer makes states pending, so it still is not.
		props = fetchedProps
	case !ok && s.pending.mayHold(k.project):
		var v sql.NullString
		err := s.db.QueryRowContext(ctx, `SELECT props FROM profiles WHERE project = ? AND kind = ? AND group_key = ? AND id = ?`,
			k.project, uint8(k.kind), k.groupKey, k.id).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("read profile: %w", err)
		}
		if v.Valid {
			props = []byte(v.String)
		}
	}
	if props != nil {
		if err := p.UnmarshalJSON(props); err != nil {
			return nil, fmt.Errorf("stored profile %q: %w", k.id, err)
		}
	}
	return p, nil
}

// profileKeyOf is the profile u updates; ok is false for an unknown kind.
func (s *Store) profileKeyOf(project int64, u *store.ProfileUpdate) (k profileKey, ok bool) {
	k = profileKey{project: project, kind: u.Kind}
	switch u.Kind {
	case profile.User:
		k.id = u.DistinctID
		if !u.IgnoreAlias {
			k.id = s.graphs.get(project).resolve(u.DistinctID)
		}
	case profile.Group:
		k.groupKey, k.id = u.GroupKey, u.GroupID
	default:
		return k, false
	}
	return k, true
}

// prefetchBatch bounds the ids of one read-ahead query.
const prefetchBatch = 512

// prefetchProfiles reads the table states of ups' profiles that neither
// this write nor a pending state holds, with one query per prefetchBatch
// ids instead of one per profile (a point query costs ~0.5 ms: a 5,000-
// profile migration spent seconds there). Profile merges within the
// batch's events have already moved ids, so the keys are final.
func (s *Store) prefetchProfiles(ctx context.Context, project int64, ups []store.ProfileUpdate) error {
	if len(ups) < 2 {
		return nil
	}
	sc := &s.scratch
	var ids []any
	s.pending.mu.Lock()
	if !s.pending.stored[project] {
		s.pending.mu.Unlock()
		return nil // loadProfile will not ask the table either
	}
	for i := range ups {
		k, ok := s.profileKeyOf(project, &ups[i])
		if !ok {
			continue
		}
		_, dirty := sc.dirty[k]
		_, pending := s.pending.m[k]
		_, fetched := sc.fetched[k]
		if dirty || pending || fetched {
			continue
		}
		sc.fetched[k] = nil // no row unless the query finds one
		ids = append(ids, k.id)
	}
	s.pending.mu.Unlock()
	for len(ids) > 0 {
		n := min(len(ids), prefetchBatch)
		if err := s.fetchProfiles(ctx, project, ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (s *Store) fetchProfiles(ctx context.Context, project int64, ids []any) error {
	args := append([]any{project}, ids...)
	rows, err := s.db.QueryContext(ctx, `SELECT kind, group_key, id, props FROM profiles WHERE project = ? AND id IN (?`+
		strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("read profiles: %w", err)
	}
	defer rows.Close()
	sc := &s.scratch
	for rows.Next() {
		var kind uint8
		var k profileKey
		var props sql.NullString
		if err := rows.Scan(&kind, &k.groupKey, &k.id, &props); err != nil {
			return fmt.Errorf("read profiles: %w", err)
		}
		k.project, k.kind = project, profile.Kind(kind)
		// Rows of another kind or group key sharing an id are not asked for.
		if _, asked := sc.fetched[k]; asked && props.Valid {
			sc.fetched[k] = []byte(props.String)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read profiles: %w", err)
	}
	return nil
}

// keep records p as k's state in this write.
func (s *Store) keep(k profileKey, p *profile.Profile, nowMs int64) {
	sc := &s.scratch
	st := profileState{deleted: !p.Exists(), updatedMs: nowMs}
	if p.Exists() {
		st.props = p.AppendJSON(nil)
	}
	if i, ok := sc.dirty[k]; ok {
		sc.profiles[i].p, sc.profiles[i].state = p, st
		return
	}
	sc.dirty[k] = len(sc.profiles)
	sc.profiles = append(sc.profiles, profileRow{key: k, p: p, state: st})
}

// applyProfile applies one update for a write. A profile error (an
// unsupported operator for the kind, the property limit) rejects the
// update; a storage error fails the whole write.
func (s *Store) applyProfile(ctx context.Context, project int64, u *store.ProfileUpdate, nowMs int64) (rejected, err error) {
	k, ok := s.profileKeyOf(project, u)
	if !ok {
		return fmt.Errorf("unknown profile kind %v", u.Kind), nil
	}
	p, err := s.loadProfile(ctx, k)
	if err != nil {
		return nil, err
	}
	// Apply is all or nothing, so p is unchanged when it refuses.
	if err := profile.Apply(p, u.Update, nowMs); err != nil {
		return err, nil
	}
	s.keep(k, p, nowMs)
	return nil, nil
}

// profileMove asks applyMoves to fold old's user profile into canonical's.
type profileMove struct {
	project        int64
	old, canonical string
}

// applyMoves performs the profile merges that identity changes of this
// write asked for, after the changes and before profile updates: old's
// profile is folded into canonical's (canonical's own values win) and
// deleted. If the merged profile would break the property limit both stay
// as they are (reads show canonical's).
func (s *Store) applyMoves(ctx context.Context, nowMs int64) error {
	moves := s.scratch.moves
	s.scratch.moves = moves[:0]
	for _, mv := range moves {
		ok := profileKey{project: mv.project, kind: profile.User, id: mv.old}
		nk := profileKey{project: mv.project, kind: profile.User, id: mv.canonical}
		op, err := s.loadProfile(ctx, ok)
		if err != nil {
			return err
		}
		if !op.Exists() {
			continue
		}
		np, err := s.loadProfile(ctx, nk)
		if err != nil {
			return err
		}
		u := profile.Update{Kind: profile.User, Op: profile.OpSetOnce, IgnoreTime: true}
		for name, v := range op.All() {
			u.Props = append(u.Props, profile.Property{Name: name, Value: v})
		}
		merged := *np
		if err := profile.Apply(&merged, u, nowMs); err != nil {
			s.log.Warn("duckstore: profiles not merged after an identity merge", "project", mv.project, "from", mv.old, "to", mv.canonical, "err", err)
			continue
		}
		s.keep(nk, &merged, nowMs)
		s.keep(ok, &profile.Profile{}, nowMs)
	}
	return nil
}

// ScanProfiles implements store.Profiles. User profiles stored under an id
// that no longer is its cluster's canonical id (a Simplified device profile
// after the device was linked, which Mixpanel does not carry over) are not
// shown.
func (s *Store) ScanProfiles(ctx context.Context, q store.ProfileScan, fn func(*store.StoredProfile) error) error {
	if err := s.enter("scan profiles"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.Sync(ctx); err != nil {
		return fmt.Errorf("duckstore: scan profiles: waiting for acknowledged writes: %w", err)
	}
	where := `project = ? AND kind = ?`
	args := []any{q.Project, uint8(q.Kind)}
	if q.Kind == profile.Group {
		where += ` AND group_key = ?`
		args = append(args, q.GroupKey)
	}
	if len(q.IDs) > 0 {
		where += ` AND id IN (?` + strings.Repeat(`, ?`, len(q.IDs)-1) + `)`
		for _, id := range q.IDs {
			args = append(args, id)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, props, updated_ms FROM profiles WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return fmt.Errorf("duckstore: scan profiles: %w", err)
	}
	defer rows.Close()
	pg := s.graphs.get(q.Project)
	var sp store.StoredProfile
	var props sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&sp.ID, &props, &sp.UpdatedMs); err != nil {
			return fmt.Errorf("duckstore: scan profiles: %w", err)
		}
		if q.Kind == profile.User && pg.resolve(sp.ID) != sp.ID {
			continue
		}
		sp.Props = props
		if err := fn(&sp); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duckstore: scan profiles: %w", err)
	}
	return nil
}

func nowMs() int64 { return time.Now().UnixMilli() }

// loadProfiledProjects marks the projects the profiles table holds rows of.
func (s *Store) loadProfiledProjects(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT project FROM profiles`)
	if err != nil {
		return fmt.Errorf("read profiled projects: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			return fmt.Errorf("read profiled projects: %w", err)
		}
		s.pending.markStored(p)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read profiled projects: %w", err)
	}
	return nil
}
