package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Daily usage counters are the monthly ones (usage.go) per UTC day: the
// same tally fills both, in one statement of the transaction that stores
// the events, spread over the same slots.

// dailyUsageMigration creates them (schema.go). Databases made before it
// count from then on.
const dailyUsageMigration = `CREATE TABLE usage_daily (
		project bigint NOT NULL,
		day text COLLATE "C" NOT NULL, -- YYYY-MM-DD, UTC
		source text COLLATE "C" NOT NULL,
		slot smallint NOT NULL,
		events bigint NOT NULL,
		PRIMARY KEY (project, day, source, slot));`

// dailyArrays are a write's daily counts as the statement's arrays.
func dailyArrays(days []store.DayCount) (projects []int64, ds, sources []string, events []int64) {
	projects, ds, sources, events = make([]int64, len(days)), make([]string, len(days)), make([]string, len(days)), make([]int64, len(days))
	for i, c := range days {
		projects[i], ds[i], sources[i], events[i] = c.Project, c.Day, c.Source, c.Events
	}
	return projects, ds, sources, events
}

// DailyUsage implements store.Usage.
func (s *Store) DailyUsage(ctx context.Context, project int64, fromDay string) ([]store.DailyUsageRow, error) {
	if err := s.enter("read daily usage"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	rows, err := s.pool.Query(ctx, `SELECT day, source, sum(events)::int8 FROM usage_daily
		WHERE project = $1 AND day >= $2 GROUP BY day, source ORDER BY day, source`, project, fromDay)
	if err != nil {
		return nil, fmt.Errorf("pgstore: read daily usage: %w", err)
	}
	var out []store.DailyUsageRow
	var u store.DailyUsageRow
	_, err = pgx.ForEachRow(rows, []any{&u.Day, &u.Source, &u.Events}, func() error {
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: read daily usage: %w", err)
	}
	return out, nil
}
