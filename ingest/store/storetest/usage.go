package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

// usageOf reads a project's counters as "month source" → events, checking
// the documented order (newest month first, then source) on the way.
func usageOf(t *testing.T, s store.Store, project int64) map[string]int64 {
	t.Helper()
	rows, err := s.Usage(context.Background(), project)
	if err != nil {
		t.Fatalf("usage of project %d: %v", project, err)
	}
	out := map[string]int64{}
	for i, r := range rows {
		if i > 0 {
			p := rows[i-1]
			if p.Month < r.Month || (p.Month == r.Month && p.Source >= r.Source) {
				t.Fatalf("usage rows out of order: %+v before %+v", p, r)
			}
		}
		out[r.Month+" "+r.Source] = r.Events
	}
	return out
}

func wantUsage(t *testing.T, s store.Store, project int64, want map[string]int64) {
	t.Helper()
	if got := usageOf(t, s, project); !reflect.DeepEqual(got, want) {
		t.Fatalf("usage of project %d:\ngot  %v\nwant %v", project, got, want)
	}
}

// ingestedAt gives events one ingestion time (the month they count in).
func ingestedAt(evs []store.Event, at time.Time) []store.Event {
	for i := range evs {
		evs[i].IngestMs = at.UnixMilli()
	}
	return evs
}

// testUsageCounts: stored events count per project, month of ingestion
// (UTC) and source, each batch of a write under its own source; duplicates,
// merges and profile updates do not count.
func testUsageCounts(t *testing.T, h Harness) {
	hd := open(t, h)
	wantUsage(t, hd.s, 1, map[string]int64{})
	oct := time.Date(2026, 10, 31, 23, 59, 59, 999e6, time.UTC)
	nov := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

	imp := ingestedAt(GenEvents(1, 30, 0), oct)
	trk := ingestedAt(GenEvents(1, 20, 10_000), nov)
	amp := ingestedAt(GenEvents(1, 7, 20_000), nov)
	res := mustWrite(t, hd.s,
		store.Batch{Project: 1, Source: store.SourceImport, Events: imp},
		store.Batch{Project: 1, Source: store.SourceTrack, Events: trk},
		store.Batch{Project: 1, Source: store.SourceAmplitude, Events: amp, Merges: []store.Merge{{DistinctIDs: [2]string{"a", "b"}, Props: []byte(`{}`)}}},
		store.Batch{Project: 2, Source: store.SourceWarehouse, Events: ingestedAt(GenEvents(2, 5, 0), nov),
			Checkpoint: &store.Checkpoint{Import: "imp", Value: []byte("w")}},
	)
	wantCounts(t, res, 62, 0, 1)
	want := map[string]int64{"2026-10 import": 30, "2026-11 track": 20, "2026-11 amplitude": 7}
	wantUsage(t, hd.s, 1, want)
	wantUsage(t, hd.s, 2, map[string]int64{"2026-11 warehouse-import": 5})

	// Duplicates of stored events, also re-sent under another source, and
	// repeats within a write count nothing; the first copy's batch counts.
	more := ingestedAt(GenEvents(1, 4, 30_000), nov)
	again := append(append([]store.Event{}, trk[:5]...), more...)
	res = mustWrite(t, hd.s,
		store.Batch{Project: 1, Source: store.SourceImport, Events: again},
		store.Batch{Project: 1, Source: store.SourceTrack, Events: more[:2]},
	)
	wantCounts(t, res, 4, 7, 0)
	want["2026-11 import"] = 4
	wantUsage(t, hd.s, 1, want)

	// One batch across the month boundary, with duplicates of stored
	// events in both months: only the new events count, each in its month.
	mixed := append(append([]store.Event{}, imp[25:]...), trk[15:]...) // 5 Oct + 5 Nov, all stored
	newOct := ingestedAt(GenEvents(1, 3, 40_000), oct)
	newNov := ingestedAt(GenEvents(1, 2, 50_000), nov)
	mixed = append(append(mixed, newOct...), newNov...)
	anon := NewEvent(1, "anon", "u", 60_000, "", `{}`) // no insert id: always stored
	anon.IngestMs = oct.UnixMilli()
	mixed = append(mixed, anon)
	res = mustWrite(t, hd.s, store.Batch{Project: 1, Source: store.SourceImport, Events: mixed})
	wantCounts(t, res, 6, 10, 0)
	want["2026-10 import"] += 4
	want["2026-11 import"] += 2
	wantUsage(t, hd.s, 1, want)

	// Profile updates and merges are not events.
	mustWrite(t, hd.s, store.Batch{Project: 1, Source: store.SourceTrack,
		Profiles: []store.ProfileUpdate{userUpdate(t, 0, `{"$token":"t","$distinct_id":"u1","$set":{"a":1}}`)},
		Merges:   []store.Merge{{DistinctIDs: [2]string{"c", "d"}, Props: []byte(`{}`)}}})
	wantUsage(t, hd.s, 1, want)

	// No source counts as "other"; no ingestion time, as the write's month.
	before := time.Now().UTC().Format("2006-01")
	bare := GenEvents(3, 3, 0)
	for i := range bare {
		bare[i].IngestMs = 0
	}
	mustWrite(t, hd.s, store.Batch{Project: 3, Events: bare})
	after := time.Now().UTC().Format("2006-01")
	got := usageOf(t, hd.s, 3)
	if len(got) != 1 || (got[before+" other"] != 3 && got[after+" other"] != 3) {
		t.Fatalf("usage of a batch without source or ingestion time: %v, want 3 in %s (other)", got, after)
	}
}

// testUsageReopen: counters commit with their events and survive a
// restart unchanged, and keep adding up after it.
func testUsageReopen(t *testing.T, h Harness) {
	hd := open(t, h)
	jan := time.Date(2027, 1, 15, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		src := []string{store.SourceImport, store.SourceTrack}[i%2]
		mustWrite(t, hd.s, store.Batch{Project: 1, Source: src, Events: ingestedAt(GenEvents(1, 100, int64(i)*1000), jan)})
	}
	want := map[string]int64{"2027-01 import": 300, "2027-01 track": 200}
	wantUsage(t, hd.s, 1, want)
	hd.reopen(t)
	wantUsage(t, hd.s, 1, want)
	// Re-sending everything after the restart adds nothing.
	for i := range 5 {
		res := mustWrite(t, hd.s, store.Batch{Project: 1, Source: store.SourceImport, Events: ingestedAt(GenEvents(1, 100, int64(i)*1000), jan)})
		wantCounts(t, res, 0, 100, 0)
	}
	mustWrite(t, hd.s, store.Batch{Project: 1, Source: store.SourceAmplitude, Events: ingestedAt(GenEvents(1, 10, 9000), jan.AddDate(0, 1, 0))})
	want["2027-02 amplitude"] = 10
	hd.reopen(t)
	wantUsage(t, hd.s, 1, want)
	var total int64
	for _, n := range want {
		total += n
	}
	if n := int64(len(Collect(t, hd.s, all(1)))); n != total {
		t.Fatalf("%d events stored, counters say %d", n, total)
	}
}

// testUsageConcurrent: concurrent writes of one counter lose no increment.
func testUsageConcurrent(t *testing.T, h Harness) {
	hd := open(t, h)
	at := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	const writers, per = 8, 20
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range per {
				evs := ingestedAt(GenEvents(1, 10, int64(w*per+i)*100), at)
				if _, err := hd.s.Write(context.Background(), []store.Batch{{Project: 1, Source: store.SourceTrack, Events: evs}}); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wantUsage(t, hd.s, 1, map[string]int64{"2027-03 track": writers * per * 10})
}
