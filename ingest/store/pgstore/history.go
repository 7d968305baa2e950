package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// historyMigration holds History tables' versions (store.Histories).
// The key leads with the profile so an as-of lookup is one index probe;
// reads across imports (HistoryProfile) use the second index.
const historyMigration = `CREATE TABLE history_versions (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		group_key text COLLATE "C" NOT NULL,
		id text COLLATE "C" NOT NULL,
		start_ms bigint NOT NULL,
		props text NOT NULL,
		PRIMARY KEY (project, import, group_key, id, start_ms));
	CREATE INDEX history_versions_profile ON history_versions (project, group_key, id);`

// HistoryApply implements store.Histories in one transaction.
func (s *Store) HistoryApply(ctx context.Context, project int64, importID, runID string, put, del []store.HistoryVersion) error {
	if err := s.enter("history"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.historyApply(ctx, project, importID, runID, put, del); err != nil {
		return fmt.Errorf("pgstore: history apply: %w", err)
	}
	return nil
}

func (s *Store) historyApply(ctx context.Context, project int64, importID, runID string, put, del []store.HistoryVersion) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer rollback(ctx, tx)
	if len(del) > 0 {
		gks, ids, starts, _ := historyCols(del)
		if _, err := tx.Exec(ctx, `DELETE FROM history_versions h USING unnest($3::text[], $4::text[], $5::bigint[]) AS d(g, i, s)
			WHERE h.project = $1 AND h.import = $2 AND h.group_key = d.g AND h.id = d.i AND h.start_ms = d.s`,
			pgx.QueryExecModeExec, project, importID, gks, ids, starts); err != nil {
			return fmt.Errorf("delete versions: %w", err)
		}
	}
	// One row per key: ON CONFLICT cannot touch a row twice in one statement.
	for len(put) > 0 {
		n, seen := 0, map[historyID]bool{}
		for n < len(put) && !seen[historyKey(put[n])] {
			seen[historyKey(put[n])] = true
			n++
		}
		gks, ids, starts, props := historyCols(put[:n])
		if _, err := tx.Exec(ctx, `INSERT INTO history_versions (project, import, group_key, id, start_ms, props)
			SELECT $1, $2, g, i, s, p FROM unnest($3::text[], $4::text[], $5::bigint[], $6::text[]) AS d(g, i, s, p)
			ON CONFLICT (project, import, group_key, id, start_ms) DO UPDATE SET props = excluded.props`,
			pgx.QueryExecModeExec, project, importID, gks, ids, starts, props); err != nil {
			return fmt.Errorf("upsert versions: %w", err)
		}
		put = put[n:]
	}
	if runID != "" {
		// A run taken over by another process must not bring back
		// versions the new run deleted: they would have no state row.
		if err := fenceRuns(ctx, tx, []string{runID}); err != nil {
			return err
		}
	}
	return tx.Commit(context.WithoutCancel(ctx))
}

// historyID is a version's key.
type historyID struct {
	groupKey, id string
	start        int64
}

func historyKey(v store.HistoryVersion) historyID { return historyID{v.GroupKey, v.ID, v.StartMs} }

func historyCols(vs []store.HistoryVersion) (gks, ids []string, starts []int64, props []string) {
	gks, ids, starts, props = make([]string, len(vs)), make([]string, len(vs)), make([]int64, len(vs)), make([]string, len(vs))
	for i, v := range vs {
		gks[i], ids[i], starts[i], props[i] = v.GroupKey, v.ID, v.StartMs, string(v.Props)
	}
	return gks, ids, starts, props
}

// HistoryAsOf implements store.Histories.
func (s *Store) HistoryAsOf(ctx context.Context, project int64, importID, groupKey string, ids []string, atMs int64, fn func(store.HistoryVersion) error) error {
	if err := s.enter("history"); err != nil {
		return err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (id) id, start_ms, props FROM history_versions
		WHERE project = $1 AND import = $2 AND group_key = $3 AND id = ANY($4::text[]) AND start_ms <= $5
		ORDER BY id, start_ms DESC`, project, importID, groupKey, ids, atMs)
	if err != nil {
		return fmt.Errorf("pgstore: history as of: %w", err)
	}
	var got []store.HistoryVersion // fn may use the store once the rows are read
	for rows.Next() {
		v := store.HistoryVersion{GroupKey: groupKey}
		var props string
		if err := rows.Scan(&v.ID, &v.StartMs, &props); err != nil {
			rows.Close()
			return fmt.Errorf("pgstore: history as of: %w", err)
		}
		v.Props = []byte(props)
		got = append(got, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: history as of: %w", err)
	}
	for _, v := range got {
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

// HistoryProfile implements store.Histories.
func (s *Store) HistoryProfile(ctx context.Context, project int64, groupKey, id string, fn func(string, store.HistoryVersion) error) error {
	if err := s.enter("history"); err != nil {
		return err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT import, start_ms, props FROM history_versions
		WHERE project = $1 AND group_key = $2 AND id = $3 ORDER BY import, start_ms`, project, groupKey, id)
	if err != nil {
		return fmt.Errorf("pgstore: history profile: %w", err)
	}
	type got struct {
		imp string
		v   store.HistoryVersion
	}
	var all []got // one profile's versions: small
	for rows.Next() {
		g := got{v: store.HistoryVersion{GroupKey: groupKey, ID: id}}
		var props string
		if err := rows.Scan(&g.imp, &g.v.StartMs, &props); err != nil {
			rows.Close()
			return fmt.Errorf("pgstore: history profile: %w", err)
		}
		g.v.Props = []byte(props)
		all = append(all, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: history profile: %w", err)
	}
	for _, g := range all {
		if err := fn(g.imp, g.v); err != nil {
			return err
		}
	}
	return nil
}

// HistoryDrop implements store.Histories.
func (s *Store) HistoryDrop(ctx context.Context, project int64, importID string) error {
	if err := s.enter("history"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.pool.Exec(ctx, `DELETE FROM history_versions WHERE project = $1 AND import = $2`, project, importID); err != nil {
		return fmt.Errorf("pgstore: history drop: %w", err)
	}
	return nil
}
