package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// The ownership bookkeeping of profile imports (store.Members, table
// import_members). A run tracks a batch's profiles in one transaction
// before it writes the batch, so the bookkeeping is never behind the
// profiles; the rules of what is owned are store.MemberState's, applied
// here under row locks so two processes cannot interleave on a profile.

// membersPage is the rows one StaleMembers query reads.
const membersPage = 1000

// TrackMembers implements store.Members.
func (s *Store) TrackMembers(ctx context.Context, project int64, importID, runID string, ms []store.Member) error {
	if err := s.enter("track members"); err != nil {
		return err
	}
	defer s.ops.Done()
	ms = store.MergeMembers(ms)
	if len(ms) == 0 {
		return nil
	}
	// Key order: two transactions lock shared rows in the same order.
	slices.SortFunc(ms, func(a, b store.Member) int { return compareMemberKeys(a.MemberKey, b.MemberKey) })
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: track members: %w", err)
	}
	defer rollback(ctx, tx)
	old := make(map[store.MemberKey]store.MemberState, len(ms))
	// One query per (kind, group key), an import has one: "id = ANY" is
	// an index scan whatever the table's size (a join with unnest() was
	// planned as a nested loop over the whole table).
	for i := 0; i < len(ms); {
		j := i
		var ids []string
		for ; j < len(ms) && ms[j].Kind == ms[i].Kind && ms[j].GroupKey == ms[i].GroupKey; j++ {
			ids = append(ids, ms[j].ID)
		}
		if err := readMembers(ctx, tx, old, project, importID, ms[i].Kind, ms[i].GroupKey, ids); err != nil {
			return fmt.Errorf("pgstore: track members: %w", err)
		}
		i = j
	}
	var upKinds []int16
	var upGroups, upIDs, upNames, upPrev []string
	for _, m := range ms {
		next, ok := old[m.MemberKey].Track(runID, m)
		if !ok {
			continue
		}
		upKinds = append(upKinds, int16(m.Kind))
		upGroups, upIDs = append(upGroups, m.GroupKey), append(upIDs, m.ID)
		upNames, upPrev = append(upNames, store.EncodeNames(next.Names)), append(upPrev, store.EncodeNames(next.Prev))
	}
	if len(upIDs) > 0 {
		_, err = tx.Exec(ctx, `INSERT INTO import_members (project, import, kind, group_key, id, run_id, names, prev_names)
			SELECT $1, $2, k.kind, k.group_key, k.id, $3, k.names, k.prev_names
			FROM unnest($4::smallint[], $5::text[], $6::text[], $7::text[], $8::text[]) AS k(kind, group_key, id, names, prev_names)
			ON CONFLICT (project, import, kind, group_key, id) DO UPDATE
			SET run_id = excluded.run_id, names = excluded.names, prev_names = excluded.prev_names`,
			project, importID, runID, upKinds, upGroups, upIDs, upNames, upPrev)
		if err != nil {
			return fmt.Errorf("pgstore: track members: %w", err)
		}
	}
	if err := fenceRuns(ctx, tx, []string{runID}); err != nil {
		return fmt.Errorf("pgstore: track members: %w", err)
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pgstore: track members: %w", err)
	}
	return nil
}

// readMembers reads the rows of ids (of one kind and group key) into old,
// locking them.
func readMembers(ctx context.Context, tx pgx.Tx, old map[store.MemberKey]store.MemberState,
	project int64, importID string, kind profile.Kind, groupKey string, ids []string) error {
	// Planned with its values every time (QueryExecModeExec): a cached
	// generic plan, made while the table was small, scans it whole and
	// tests every row against the whole array.
	rows, err := tx.Query(ctx, `SELECT id, run_id, names, prev_names FROM import_members
		WHERE project = $1 AND import = $2 AND kind = $3 AND group_key = $4 AND id = ANY($5::text[])
		ORDER BY id FOR UPDATE`, pgx.QueryExecModeExec, project, importID, int16(kind), groupKey, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		k := store.MemberKey{Kind: kind, GroupKey: groupKey}
		var st store.MemberState
		var names, prev string
		if err := rows.Scan(&k.ID, &st.RunID, &names, &prev); err != nil {
			return err
		}
		if st.Names, err = store.DecodeNames(names); err == nil {
			st.Prev, err = store.DecodeNames(prev)
		}
		if err != nil {
			return fmt.Errorf("profile %q: %w", k.ID, err)
		}
		old[k] = st
	}
	return rows.Err()
}

func compareMemberKeys(a, b store.MemberKey) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.GroupKey, b.GroupKey), strings.Compare(a.ID, b.ID))
}

// StaleMembers implements store.Members, a page at a time in key order
// (the primary key's), so no query is open while fn writes.
func (s *Store) StaleMembers(ctx context.Context, project int64, importID, runID string, fn func(store.StaleMember) error) error {
	if err := s.enter("stale members"); err != nil {
		return err
	}
	defer s.ops.Done()
	var keys []store.MemberKey
	var states []store.MemberState
	var after store.MemberKey // kinds start at 1: the zero key is before every row
	for {
		keys, states = keys[:0], states[:0]
		// A profile the run tracked with nothing left over from before
		// has nothing stale: most of them, in a steady state.
		// Planned with its values (see readMembers): the primary key's
		// order, from the last key on.
		rows, err := s.pool.Query(ctx, `SELECT kind, group_key, id, run_id, names, prev_names FROM import_members
			WHERE project = $1 AND import = $2 AND (kind, group_key, id) > ($3, $4, $5)
				AND NOT (run_id = $6 AND prev_names = '[]')
			ORDER BY kind, group_key, id LIMIT $7`, pgx.QueryExecModeExec,
			project, importID, int16(after.Kind), after.GroupKey, after.ID, runID, membersPage)
		if err != nil {
			return fmt.Errorf("pgstore: stale members: %w", err)
		}
		for rows.Next() {
			k, st, err := store.ScanMember(rows.Scan)
			if err != nil {
				rows.Close()
				return fmt.Errorf("pgstore: stale members: %w", err)
			}
			keys, states = append(keys, k), append(states, st)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pgstore: stale members: %w", err)
		}
		if err := store.EmitStale(keys, states, runID, fn); err != nil {
			return err
		}
		if len(keys) < membersPage {
			return nil
		}
		after = keys[len(keys)-1]
	}
}

// SettleMembers implements store.Members.
func (s *Store) SettleMembers(ctx context.Context, project int64, importID, runID string) error {
	if err := s.enter("settle members"); err != nil {
		return err
	}
	defer s.ops.Done()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: settle members: %w", err)
	}
	defer rollback(ctx, tx)
	if _, err := tx.Exec(ctx, `DELETE FROM import_members WHERE project = $1 AND import = $2 AND run_id <> $3`, project, importID, runID); err != nil {
		return fmt.Errorf("pgstore: settle members: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE import_members SET prev_names = '[]'
		WHERE project = $1 AND import = $2 AND run_id = $3 AND prev_names <> '[]'`, project, importID, runID); err != nil {
		return fmt.Errorf("pgstore: settle members: %w", err)
	}
	if err := fenceRuns(ctx, tx, []string{runID}); err != nil {
		return fmt.Errorf("pgstore: settle members: %w", err)
	}
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pgstore: settle members: %w", err)
	}
	return nil
}
