package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Usage counters (migration 4) are added to in the transaction that stores
// the events, so they commit, or not, with them. An event counts in the
// month of its IngestMs (store.UsageTally).

// usageSlots spreads one counter over several rows: event-only writes of
// a project run concurrently (locks.go), and on a single row each would
// wait for the previous one's COMMIT. A backend always uses the same slot.
const usageSlots = 16

// writeUsage adds the events this write stored to the counters. Write
// calls it after insertEvents, which records which staged events were
// already stored (w.dup), and before the checkpoints (see writeCheckpoints:
// the row locks taken here are held only until COMMIT).
func (w *writeTx) writeUsage(ctx context.Context, batches []store.Batch) error {
	if len(w.stage) == 0 {
		return nil
	}
	tally := store.UsageTally{NowMs: w.now}
	for i := range w.stage {
		if w.dup != nil && w.dup[i] {
			continue // an event stored before: acknowledged, not stored again
		}
		r := &w.stage[i]
		tally.Add(r.project, store.UsageSource(batches[r.batch].Source), r.e.IngestMs, 1)
	}
	counts := tally.Counts()
	if len(counts) == 0 {
		return nil
	}
	projects, months, sources, events := make([]int64, len(counts)), make([]string, len(counts)), make([]string, len(counts)), make([]int64, len(counts))
	for i, c := range counts {
		projects[i], months[i], sources[i], events[i] = c.Project, c.Month, c.Source, c.Events
	}
	dp, dd, ds, dn := dailyArrays(tally.DayCounts())
	// Counts are in key order and ORDER BY keeps it, so every write locks
	// counter rows in one order and two writes cannot deadlock on them.
	// The daily counters ride the same statement (one round trip); an
	// unread WITH runs after the main statement, so every write takes the
	// tables in one order too.
	_, err := w.tx.Exec(ctx, `WITH daily AS (INSERT INTO usage_daily (project, day, source, slot, events)
			SELECT p, d, s, pg_backend_pid() % $5, n FROM unnest($6::int8[], $7::text[], $8::text[], $9::int8[]) WITH ORDINALITY AS t(p, d, s, n, o)
			ORDER BY o
			ON CONFLICT (project, day, source, slot) DO UPDATE SET events = usage_daily.events + excluded.events)
		INSERT INTO usage_counters (project, month, source, slot, events)
		SELECT p, m, s, pg_backend_pid() % $5, n FROM unnest($1::int8[], $2::text[], $3::text[], $4::int8[]) WITH ORDINALITY AS t(p, m, s, n, o)
		ORDER BY o
		ON CONFLICT (project, month, source, slot) DO UPDATE SET events = usage_counters.events + excluded.events`,
		projects, months, sources, events, usageSlots, dp, dd, ds, dn)
	if err != nil {
		return fmt.Errorf("usage counters: %w", err)
	}
	return nil
}

// Usage implements store.Usage.
func (s *Store) Usage(ctx context.Context, project int64) ([]store.UsageRow, error) {
	if err := s.enter("read usage"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT month, source, sum(events)::int8 FROM usage_counters
		WHERE project = $1 GROUP BY month, source ORDER BY month DESC, source`, project)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read usage: %w", err)
	}
	var out []store.UsageRow
	var u store.UsageRow
	_, err = pgx.ForEachRow(rows, []any{&u.Month, &u.Source, &u.Events}, func() error {
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: read usage: %w", err)
	}
	return out, nil
}
