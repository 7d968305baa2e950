package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// fenceRuns refuses to commit writes of runs recorded as ended. A process
// learns that it lost a run only at its next lease renewal; until then a
// stalled process could write checkpoints, or full-sync ownership and
// unsets, beside the recovery run of another process. FOR SHARE orders
// this check with InterruptRuns' FOR UPDATE: a reap in progress waits for
// this commit (and is skipped by SKIP LOCKED until then), a reap already
// committed is seen here. Ids without a row (runs outside the scheduler,
// such as tests of the engine alone) are not fenced.
func fenceRuns(ctx context.Context, tx pgx.Tx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var ended string
	err := tx.QueryRow(ctx, `SELECT id FROM sync_runs WHERE id = ANY($1) AND status <> 'RUNNING' LIMIT 1 FOR SHARE`, ids).Scan(&ended)
	switch {
	case err == pgx.ErrNoRows:
		return nil
	case err != nil:
		return fmt.Errorf("pgstore: checking runs: %w", err)
	}
	return fmt.Errorf("run %s: %w", ended, store.ErrRunEnded)
}

// batchRuns lists the RunIDs the batches carry.
func batchRuns(batches []store.Batch) []string {
	var ids []string
	for i := range batches {
		if id := batches[i].RunID; id != "" && (len(ids) == 0 || ids[len(ids)-1] != id) {
			ids = append(ids, id)
		}
	}
	return ids
}
