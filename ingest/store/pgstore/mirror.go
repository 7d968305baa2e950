package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tributary-dev/tributary/ingest/store"
)

// mirrorMigration holds Mirror syncs' table states (store.Mirrors): one
// row per key of each mirrored table, bytea so keys sort bytewise. Every
// run rewrites each row's seen mark; the free space left in each page
// lets those updates stay on the page (HOT) without index writes.
const mirrorMigration = `CREATE TABLE mirror_state (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		key bytea NOT NULL,
		hash bytea NOT NULL,
		ref bytea NOT NULL,
		flag smallint NOT NULL,
		seen bigint NOT NULL,
		PRIMARY KEY (project, import, key)) WITH (fillfactor = 70);
	CREATE TABLE mirror_runs (
		project bigint NOT NULL,
		run_id text COLLATE "C" NOT NULL,
		inserted bigint NOT NULL,
		updated bigint NOT NULL,
		deleted bigint NOT NULL,
		unchanged bigint NOT NULL,
		PRIMARY KEY (project, run_id));`

// mirrorPage is how many rows MirrorUnseen reads at a time.
const mirrorPage = 1000

// MirrorLookup implements store.Mirrors.
func (s *Store) MirrorLookup(ctx context.Context, project int64, importID string, gen int64, keys [][]byte, fn func(store.MirrorRow) error) error {
	if err := s.enter("mirror"); err != nil {
		return err
	}
	defer s.ops.Done()
	q := `SELECT key, hash, ref, flag FROM mirror_state WHERE project = $1 AND import = $2 AND key = ANY($3::bytea[])`
	args := []any{pgx.QueryExecModeExec, project, importID, keys}
	if gen > 0 {
		q = `UPDATE mirror_state SET seen = $4 WHERE project = $1 AND import = $2 AND key = ANY($3::bytea[])
			RETURNING key, hash, ref, flag`
		args = append(args, gen)
	}
	if err := s.mirrorRows(ctx, q, args, fn); err != nil {
		return fmt.Errorf("pgstore: mirror lookup: %w", err)
	}
	return nil
}

// mirrorRows runs q and calls fn for each row once they are all read,
// so fn may use the store.
func (s *Store) mirrorRows(ctx context.Context, q string, args []any, fn func(store.MirrorRow) error) error {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	var got []store.MirrorRow
	for rows.Next() {
		var r store.MirrorRow
		var flag int16
		if err := rows.Scan(&r.Key, &r.Hash, &r.Ref, &flag); err != nil {
			rows.Close()
			return err
		}
		r.Flag = store.MirrorFlag(flag)
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, r := range got {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// MirrorApply implements store.Mirrors in one transaction, fenced by
// a.RunID like a run's writes.
func (s *Store) MirrorApply(ctx context.Context, a store.MirrorApply) error {
	if err := s.enter("mirror"); err != nil {
		return err
	}
	defer s.ops.Done()
	// A change begun is let finish (store.Mirrors): the run may end meanwhile.
	if err := s.mirrorApply(context.WithoutCancel(ctx), a); err != nil {
		return fmt.Errorf("pgstore: mirror apply: %w", err)
	}
	return nil
}

func (s *Store) mirrorApply(ctx context.Context, a store.MirrorApply) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer rollback(ctx, tx)
	if len(a.DeleteEvents) > 0 {
		times := make([]int64, len(a.DeleteEvents))
		keys := make([]pgtype.UUID, len(a.DeleteEvents))
		for i, e := range a.DeleteEvents {
			times[i], keys[i] = e.TimeMs, pgtype.UUID{Bytes: e.Key, Valid: true}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM events e USING unnest($2::bigint[], $3::uuid[]) AS d(time_ms, dedup_key)
			WHERE e.project = $1 AND e.time_ms = d.time_ms AND e.dedup_key = d.dedup_key`,
			pgx.QueryExecModeExec, a.Project, times, keys); err != nil {
			return fmt.Errorf("delete events: %w", err)
		}
	}
	if len(a.Remove) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM mirror_state WHERE project = $1 AND import = $2 AND key = ANY($3::bytea[])`,
			pgx.QueryExecModeExec, a.Project, a.Import, a.Remove); err != nil {
			return fmt.Errorf("remove keys: %w", err)
		}
	}
	if len(a.Rows) > 0 {
		keys, hashes, refs := make([][]byte, len(a.Rows)), make([][]byte, len(a.Rows)), make([][]byte, len(a.Rows))
		flags := make([]int16, len(a.Rows))
		for i, r := range a.Rows {
			keys[i], hashes[i], refs[i], flags[i] = r.Key, r.Hash, r.Ref, int16(r.Flag)
			if refs[i] == nil {
				refs[i] = []byte{}
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mirror_state (project, import, key, hash, ref, flag, seen)
			SELECT $1, $2, r.key, r.hash, r.ref, r.flag, $3
			FROM unnest($4::bytea[], $5::bytea[], $6::bytea[], $7::smallint[]) AS r(key, hash, ref, flag)
			ON CONFLICT (project, import, key) DO UPDATE
			SET hash = excluded.hash, ref = excluded.ref, flag = excluded.flag, seen = excluded.seen`,
			pgx.QueryExecModeExec, a.Project, a.Import, a.Gen, keys, hashes, refs, flags); err != nil {
			return fmt.Errorf("upsert keys: %w", err)
		}
	}
	if a.RunID != "" {
		if err := fenceRuns(ctx, tx, []string{a.RunID}); err != nil {
			return err
		}
	}
	// Interrupting a COMMIT would leave its outcome unknown: no ctx here.
	return tx.Commit(context.WithoutCancel(ctx))
}

// MirrorUnseen implements store.Mirrors, a page at a time in key order.
func (s *Store) MirrorUnseen(ctx context.Context, project int64, importID string, gen int64, fn func(store.MirrorRow) error) error {
	if err := s.enter("mirror"); err != nil {
		return err
	}
	defer s.ops.Done()
	after := []byte{}
	for {
		n := 0
		err := s.mirrorRows(ctx, `SELECT key, hash, ref, flag FROM mirror_state
			WHERE project = $1 AND import = $2 AND seen <> $3 AND key > $4 ORDER BY key LIMIT $5`,
			[]any{project, importID, gen, after, mirrorPage}, func(r store.MirrorRow) error {
				n++
				after = r.Key
				return fn(r)
			})
		if err != nil {
			return fmt.Errorf("pgstore: mirror unseen: %w", err)
		}
		if n < mirrorPage {
			return nil
		}
	}
}

// MirrorSettle implements store.Mirrors.
func (s *Store) MirrorSettle(ctx context.Context, project int64, importID, runID string) error {
	if err := s.enter("mirror"); err != nil {
		return err
	}
	defer s.ops.Done()
	err := func() error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer rollback(ctx, tx)
		if _, err := tx.Exec(ctx, `DELETE FROM mirror_state WHERE project = $1 AND import = $2 AND flag = $3`,
			project, importID, int16(store.MirrorDeleting)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE mirror_state SET flag = $3 WHERE project = $1 AND import = $2 AND flag <> $3`,
			project, importID, int16(store.MirrorSettled)); err != nil {
			return err
		}
		if runID != "" {
			if err := fenceRuns(ctx, tx, []string{runID}); err != nil {
				return err
			}
		}
		return tx.Commit(context.WithoutCancel(ctx))
	}()
	if err != nil {
		return fmt.Errorf("pgstore: mirror settle: %w", err)
	}
	return nil
}

// MirrorCount implements store.Mirrors.
func (s *Store) MirrorCount(ctx context.Context, project int64, importID string) (int64, error) {
	if err := s.enter("mirror"); err != nil {
		return 0, err
	}
	defer s.ops.Done()
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM mirror_state WHERE project = $1 AND import = $2 AND flag <> $3`,
		project, importID, int16(store.MirrorDeleting)).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: mirror count: %w", err)
	}
	return n, nil
}

// MirrorDrop implements store.Mirrors.
func (s *Store) MirrorDrop(ctx context.Context, project int64, importID string) error {
	if err := s.enter("mirror"); err != nil {
		return err
	}
	defer s.ops.Done()
	if _, err := s.pool.Exec(ctx, `DELETE FROM mirror_state WHERE project = $1 AND import = $2`, project, importID); err != nil {
		return fmt.Errorf("pgstore: mirror drop: %w", err)
	}
	return nil
}

// MirrorRecordRun implements store.Mirrors.
func (s *Store) MirrorRecordRun(ctx context.Context, project int64, runID string, c store.MirrorCounts) error {
	if err := s.enter("mirror"); err != nil {
		return err
	}
	defer s.ops.Done()
	_, err := s.pool.Exec(ctx, `INSERT INTO mirror_runs (project, run_id, inserted, updated, deleted, unchanged, table_rows) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (project, run_id) DO UPDATE SET inserted = excluded.inserted, updated = excluded.updated,
			deleted = excluded.deleted, unchanged = excluded.unchanged, table_rows = excluded.table_rows`,
		project, runID, c.Inserted, c.Updated, c.Deleted, c.Unchanged, c.Rows)
	if err != nil {
		return fmt.Errorf("pgstore: mirror record run: %w", err)
	}
	return nil
}

// MirrorRunCounts implements store.Mirrors.
func (s *Store) MirrorRunCounts(ctx context.Context, project int64, runIDs []string) (map[string]store.MirrorCounts, error) {
	if err := s.enter("mirror"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT run_id, inserted, updated, deleted, unchanged, table_rows FROM mirror_runs
		WHERE project = $1 AND run_id = ANY($2::text[])`, project, runIDs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: mirror run counts: %w", err)
	}
	defer rows.Close()
	out := map[string]store.MirrorCounts{}
	for rows.Next() {
		var id string
		var c store.MirrorCounts
		if err := rows.Scan(&id, &c.Inserted, &c.Updated, &c.Deleted, &c.Unchanged, &c.Rows); err != nil {
			return nil, fmt.Errorf("pgstore: mirror run counts: %w", err)
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: mirror run counts: %w", err)
	}
	return out, nil
}
