package duckstore

import (
	"context"
	"database/sql/driver"
	"fmt"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Daily usage counters take the monthly counters' path (usage.go): a
// write's per-day counts ride its log entry after the monthly ones, the
// loader adds them to usage_daily in the transaction that advances
// log_state, and readers use the in-memory totals (a few rows per project
// and day).

// dailySchema is this file's part of the schema (Open runs it after
// duckstore.go's list). Files made before it count from then on.
var dailySchema = []string{
	`CREATE TABLE IF NOT EXISTS usage_daily (project BIGINT NOT NULL, day VARCHAR NOT NULL, source VARCHAR NOT NULL, events BIGINT NOT NULL)`,
}

// loadDailyUsage reads the daily counters (loadUsage, after the log replay).
func (s *Store) loadDailyUsage(ctx context.Context) error {
	s.usage.days = map[store.DayKey]int64{}
	rows, err := s.db.QueryContext(ctx, `SELECT project, day, source, events FROM usage_daily`)
	if err != nil {
		return fmt.Errorf("load daily usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k store.DayKey
		var n int64
		if err := rows.Scan(&k.Project, &k.Day, &k.Source, &n); err != nil {
			return fmt.Errorf("load daily usage: %w", err)
		}
		s.usage.days[k] += n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load daily usage: %w", err)
	}
	return nil
}

// writeDailyUsage adds a loader transaction's daily counts to the table,
// as writeUsage does the monthly ones (the loader is its only writer).
func writeDailyUsage(ctx context.Context, c *duckdb.Conn, counts map[store.DayKey]int64) error {
	for k, n := range counts {
		res, err := c.ExecContext(ctx, `UPDATE usage_daily SET events = events + ? WHERE project = ? AND day = ? AND source = ?`,
			[]driver.NamedValue{{Ordinal: 1, Value: n}, {Ordinal: 2, Value: k.Project}, {Ordinal: 3, Value: k.Day}, {Ordinal: 4, Value: k.Source}})
		if err != nil {
			return fmt.Errorf("write daily usage: %w", err)
		}
		done, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("write daily usage: %w", err)
		}
		if done > 0 {
			continue
		}
		if err := execArgs(ctx, c, `INSERT INTO usage_daily VALUES (?, ?, ?, ?)`, k.Project, k.Day, k.Source, n); err != nil {
			return fmt.Errorf("write daily usage: %w", err)
		}
	}
	return nil
}

// DailyUsage implements store.Usage.
func (s *Store) DailyUsage(ctx context.Context, project int64, fromDay string) ([]store.DailyUsageRow, error) {
	if err := s.enter("read daily usage"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: read daily usage: %w", err)
	}
	s.usage.mu.Lock()
	var out []store.DailyUsageRow
	for k, n := range s.usage.days {
		if k.Project == project && k.Day >= fromDay {
			out = append(out, store.DailyUsageRow{Day: k.Day, Source: k.Source, Events: n})
		}
	}
	s.usage.mu.Unlock()
	store.SortDailyUsage(out)
	return out, nil
}
