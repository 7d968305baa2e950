package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

func wantDailyUsage(t *testing.T, s store.Store, project int64, from string, want []store.DailyUsageRow) {
	t.Helper()
	got, err := s.DailyUsage(context.Background(), project, from)
	if err != nil {
		t.Fatalf("daily usage of project %d: %v", project, err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("daily usage of project %d from %s:\ngot  %+v\nwant %+v", project, from, got, want)
	}
}

// testDailyUsage: the daily counters count what the monthly ones do, per
// UTC day of ingestion, oldest first, from the day asked; one batch across
// midnight counts in both days; duplicates count nothing; a restart keeps
// them.
func testDailyUsage(t *testing.T, h Harness) {
	hd := open(t, h)
	wantDailyUsage(t, hd.s, 1, "2000-01-01", nil)
	d1 := time.Date(2026, 11, 30, 23, 59, 59, 999e6, time.UTC)
	d2 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	trk := ingestedAt(GenEvents(1, 20, 0), d1)
	span := append(ingestedAt(GenEvents(1, 3, 10_000), d1), ingestedAt(GenEvents(1, 4, 20_000), d2)...)
	mustWrite(t, hd.s,
		store.Batch{Project: 1, Source: store.SourceTrack, Events: trk},
		store.Batch{Project: 1, Source: store.SourceImport, Events: span},
		store.Batch{Project: 2, Source: store.SourceWarehouse, Events: ingestedAt(GenEvents(2, 5, 0), d2)},
	)
	// Duplicates, also under another source, add nothing.
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Source: store.SourceAmplitude, Events: trk[:5]})
	wantCounts(t, res, 0, 5, 0)
	want := []store.DailyUsageRow{
		{Day: "2026-11-30", Source: store.SourceImport, Events: 3},
		{Day: "2026-11-30", Source: store.SourceTrack, Events: 20},
		{Day: "2026-12-01", Source: store.SourceImport, Events: 4},
	}
	wantDailyUsage(t, hd.s, 1, "2026-11-01", want)
	wantDailyUsage(t, hd.s, 1, "2026-12-01", want[2:])
	wantDailyUsage(t, hd.s, 2, "2026-11-01", []store.DailyUsageRow{{Day: "2026-12-01", Source: store.SourceWarehouse, Events: 5}})
	// The monthly counters agree.
	wantUsage(t, hd.s, 1, map[string]int64{"2026-11 import": 3, "2026-11 track": 20, "2026-12 import": 4})
	hd.reopen(t)
	wantDailyUsage(t, hd.s, 1, "2026-11-01", want)
	mustWrite(t, hd.s, store.Batch{Project: 1, Source: store.SourceImport, Events: ingestedAt(GenEvents(1, 2, 30_000), d2)})
	want[2].Events += 2
	wantDailyUsage(t, hd.s, 1, "2026-11-01", want)
}
