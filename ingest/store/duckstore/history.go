package duckstore

import (
	"context"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// historySchema holds History tables' versions (store.Histories). A new
// table, so files made before gain it and older builds ignore it.
var historySchema = []string{
	`CREATE TABLE IF NOT EXISTS history_versions (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, group_key VARCHAR NOT NULL, id VARCHAR NOT NULL,
		start_ms BIGINT NOT NULL, props VARCHAR NOT NULL,
		PRIMARY KEY (project, import, group_key, id, start_ms))`,
}

// HistoryApply implements store.Histories. One process owns the file,
// so there is no other process's run to fence runID against.
func (s *Store) HistoryApply(ctx context.Context, project int64, importID, _ string, put, del []store.HistoryVersion) error {
	if err := s.enter("history apply"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := s.historyApplyTx(ctx, project, importID, put, del); err != nil {
		return fmt.Errorf("duckstore: history apply: %w", err)
	}
	return nil
}

func (s *Store) historyApplyTx(ctx context.Context, project int64, importID string, put, del []store.HistoryVersion) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	// An upserted version is deleted first too: DuckDB refuses two rows
	// of one key in a single INSERT … ON CONFLICT, and the caller's list
	// may repeat a key (the last one wins).
	for _, vs := range [][]store.HistoryVersion{del, put} {
		for i := 0; i < len(vs); i += mirrorChunk {
			gks, ids, starts := historyCols(vs[i:min(i+mirrorChunk, len(vs))])
			if _, err := tx.ExecContext(ctx, `DELETE FROM history_versions WHERE rowid IN (
				SELECT h.rowid FROM history_versions h
				JOIN (SELECT unnest(?::VARCHAR[]) AS g, unnest(?::VARCHAR[]) AS i, unnest(?::BIGINT[]) AS s) d
					ON h.group_key = d.g AND h.id = d.i AND h.start_ms = d.s
				WHERE h.project = ?::BIGINT AND h.import = ?::VARCHAR)`,
				gks, ids, starts, project, importID); err != nil {
				return fmt.Errorf("delete versions: %w", err)
			}
		}
	}
	put = lastOfKey(put)
	for i := 0; i < len(put); i += mirrorChunk {
		chunk := put[i:min(i+mirrorChunk, len(put))]
		gks, ids, starts := historyCols(chunk)
		props := make([]string, len(chunk))
		for j, v := range chunk {
			props[j] = string(v.Props)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO history_versions
			SELECT ?::BIGINT, ?::VARCHAR, g, i, s, p
			FROM (SELECT unnest(?::VARCHAR[]) AS g, unnest(?::VARCHAR[]) AS i, unnest(?::BIGINT[]) AS s, unnest(?::VARCHAR[]) AS p)`,
			project, importID, gks, ids, starts, props); err != nil {
			return fmt.Errorf("insert versions: %w", err)
		}
	}
	return tx.Commit()
}

func historyCols(vs []store.HistoryVersion) (gks, ids []string, starts []int64) {
	gks, ids, starts = make([]string, len(vs)), make([]string, len(vs)), make([]int64, len(vs))
	for i, v := range vs {
		gks[i], ids[i], starts[i] = v.GroupKey, v.ID, v.StartMs
	}
	return gks, ids, starts
}

// lastOfKey drops every version a later one of the same key replaces.
func lastOfKey(vs []store.HistoryVersion) []store.HistoryVersion {
	type key struct {
		gk, id string
		start  int64
	}
	at := make(map[key]int, len(vs)) // bounded by the caller's batch
	out := make([]store.HistoryVersion, 0, len(vs))
	for _, v := range vs {
		k := key{v.GroupKey, v.ID, v.StartMs}
		if j, ok := at[k]; ok {
			out[j] = v
			continue
		}
		at[k] = len(out)
		out = append(out, v)
	}
	return out
}

// HistoryAsOf implements store.Histories.
func (s *Store) HistoryAsOf(ctx context.Context, project int64, importID, groupKey string, ids []string, atMs int64, fn func(store.HistoryVersion) error) error {
	if err := s.enter("history as of"); err != nil {
		return err
	}
	defer s.ops.Done()
	for i := 0; i < len(ids); i += mirrorChunk {
		var got []store.HistoryVersion // one chunk: fn may use the store
		err := func() error {
			rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT ON (h.id) h.id, h.start_ms, h.props FROM history_versions h
				JOIN (SELECT unnest(?::VARCHAR[]) AS i) q ON h.id = q.i
				WHERE h.project = ?::BIGINT AND h.import = ?::VARCHAR AND h.group_key = ?::VARCHAR AND h.start_ms <= ?::BIGINT
				ORDER BY h.id, h.start_ms DESC`, ids[i:min(i+mirrorChunk, len(ids))], project, importID, groupKey, atMs)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				v := store.HistoryVersion{GroupKey: groupKey}
				var props string
				if err := rows.Scan(&v.ID, &v.StartMs, &props); err != nil {
					return err
				}
				v.Props = []byte(props)
				got = append(got, v)
			}
			return rows.Err()
		}()
		if err != nil {
			return fmt.Errorf("duckstore: history as of: %w", err)
		}
		for _, v := range got {
			if err := fn(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// HistoryProfile implements store.Histories.
func (s *Store) HistoryProfile(ctx context.Context, project int64, groupKey, id string, fn func(string, store.HistoryVersion) error) error {
	if err := s.enter("history profile"); err != nil {
		return err
	}
	defer s.ops.Done()
	rows, err := s.db.QueryContext(ctx, `SELECT import, start_ms, props FROM history_versions
		WHERE project = ? AND group_key = ? AND id = ? ORDER BY import, start_ms`, project, groupKey, id)
	if err != nil {
		return fmt.Errorf("duckstore: history profile: %w", err)
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
			return fmt.Errorf("duckstore: history profile: %w", err)
		}
		g.v.Props = []byte(props)
		all = append(all, g)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("duckstore: history profile: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("duckstore: history profile: %w", err)
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
	if err := s.enter("history drop"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM history_versions WHERE project = ? AND import = ?`, project, importID); err != nil {
		return fmt.Errorf("duckstore: history drop: %w", err)
	}
	return nil
}
