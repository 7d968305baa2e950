package duckstore

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sync"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Usage counters follow the checkpoints' pattern (syncs.go): a write's
// increments ride its log entry (the rows it stores are counted by plan,
// after dedup), the loader adds them to usage_counters in the transaction
// that advances log_state, so replaying the log after a crash adds each
// entry's counts exactly once. Readers use the in-memory totals, which
// Write updates once the entry is durable and Open fills from the table
// after replaying the log: reads never wait for the loader.

type usageState struct {
	// tally and logged belong to the write in progress (writer lock).
	tally      store.UsageTally
	logged     []store.UsageCount // tally's counts, as encoded in the entry
	loggedDays []store.DayCount   // and per day (usage_daily.go)

	mu     sync.Mutex
	totals map[store.UsageKey]int64 // everything durable
	days   map[store.DayKey]int64
}

// reset starts a write's tally (plan).
func (u *usageState) reset(nowMs int64) {
	u.tally.Reset(nowMs)
	u.logged = u.logged[:0]
	u.loggedDays = u.loggedDays[:0]
}

// planned seals the write's tally for its log entry.
func (u *usageState) planned() []store.UsageCount {
	u.logged = u.tally.Counts()
	u.loggedDays = u.tally.DayCounts()
	return u.logged
}

// noteUsage publishes a durable write's counts to readers.
func (s *Store) noteUsage() {
	if len(s.usage.logged) == 0 {
		return
	}
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	for _, c := range s.usage.logged {
		s.usage.totals[c.UsageKey] += c.Events
	}
	for _, c := range s.usage.loggedDays {
		s.usage.days[c.DayKey] += c.Events
	}
	s.usage.logged = s.usage.logged[:0]
	s.usage.loggedDays = s.usage.loggedDays[:0]
}

// loadUsage reads the counters; Open calls it after the log replay, so the
// table holds every durable entry.
func (s *Store) loadUsage(ctx context.Context) error {
	s.usage.totals = map[store.UsageKey]int64{}
	rows, err := s.db.QueryContext(ctx, `SELECT project, month, source, events FROM usage_counters`)
	if err != nil {
		return fmt.Errorf("load usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k store.UsageKey
		var n int64
		if err := rows.Scan(&k.Project, &k.Month, &k.Source, &n); err != nil {
			return fmt.Errorf("load usage: %w", err)
		}
		s.usage.totals[k] += n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load usage: %w", err)
	}
	return s.loadDailyUsage(ctx)
}

// writeUsage adds a loader transaction's counts to the table. The loader
// is the table's only writer, so update-else-insert cannot race. No
// primary key: DuckDB's ON CONFLICT refuses a key updated twice in one
// transaction, and the table stays tiny (one row per project, month and
// source).
func writeUsage(ctx context.Context, c *duckdb.Conn, counts map[store.UsageKey]int64) error {
	for k, n := range counts {
		res, err := c.ExecContext(ctx, `UPDATE usage_counters SET events = events + ? WHERE project = ? AND month = ? AND source = ?`,
			[]driver.NamedValue{{Ordinal: 1, Value: n}, {Ordinal: 2, Value: k.Project}, {Ordinal: 3, Value: k.Month}, {Ordinal: 4, Value: k.Source}})
		if err != nil {
			return fmt.Errorf("write usage: %w", err)
		}
		done, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("write usage: %w", err)
		}
		if done > 0 {
			continue
		}
		if err := execArgs(ctx, c, `INSERT INTO usage_counters VALUES (?, ?, ?, ?)`, k.Project, k.Month, k.Source, n); err != nil {
			return fmt.Errorf("write usage: %w", err)
		}
	}
	return nil
}

// Usage implements store.Usage.
func (s *Store) Usage(ctx context.Context, project int64) ([]store.UsageRow, error) {
	if err := s.enter("read usage"); err != nil {
		return nil, err
	}
	defer s.ops.Done()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("duckstore: read usage: %w", err)
	}
	s.usage.mu.Lock()
	var out []store.UsageRow
	for k, n := range s.usage.totals {
		if k.Project == project {
			out = append(out, store.UsageRow{Month: k.Month, Source: k.Source, Events: n})
		}
	}
	s.usage.mu.Unlock()
	store.SortUsage(out)
	return out, nil
}
