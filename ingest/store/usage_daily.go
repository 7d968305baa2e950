package store

import (
	"cmp"
	"slices"
)

// Daily usage: the usage counters again, per UTC day of ingestion instead
// of per month, for "events per day by source" (the console's overview).
// A store adds to them in the same commit as the monthly counters, from
// the same tally (UsageTally), so both agree and neither costs a look at
// the events a second time.

// DayKey names one daily counter.
type DayKey struct {
	Project int64
	Day     string // "YYYY-MM-DD", UTC
	Source  string
}

// DayCount is one daily counter's increment.
type DayCount struct {
	DayKey
	Events int64
}

// DailyUsageRow is one daily counter.
type DailyUsageRow struct {
	Day    string // "YYYY-MM-DD", UTC
	Source string
	Events int64
}

// DayCounts returns the write's totals per day, in key order (project,
// day, source), the order in which a store takes counter row locks.
func (t *UsageTally) DayCounts() []DayCount {
	t.flush()
	out := make([]DayCount, 0, len(t.counts))
	for k, n := range t.counts {
		out = append(out, DayCount{k, n})
	}
	slices.SortFunc(out, func(a, b DayCount) int {
		return cmp.Or(cmp.Compare(a.Project, b.Project), cmp.Compare(a.Day, b.Day), cmp.Compare(a.Source, b.Source))
	})
	return out
}

// SortDailyUsage orders rows as DailyUsage returns them: oldest day first,
// then by source.
func SortDailyUsage(rows []DailyUsageRow) {
	slices.SortFunc(rows, func(a, b DailyUsageRow) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Source, b.Source))
	})
}
