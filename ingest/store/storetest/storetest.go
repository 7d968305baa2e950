// Package storetest is the conformance suite every store.Store must pass
// unchanged. The rules readers and the ingest path rely on (exact dedup,
// atomic durable writes, ordered streaming scans) are checked here once,
// so a new backend proves itself by running Run with a Harness.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Harness tells the suite how to get stores of the implementation under test.
type Harness struct {
	// Open returns a fresh, empty store isolated to this test.
	Open func(t testing.TB) store.Store
	// Reopen closes s and opens the same underlying data again (a process restart).
	Reopen func(t testing.TB, s store.Store) store.Store
	// Merges returns the merges stored for project, in arrival order. The
	// Store interface has no reader for merges yet, so the suite needs the
	// implementation's own way to prove they were stored and survive a restart.
	Merges func(t testing.TB, s store.Store, project int64) []store.Merge
}

// Run runs every conformance check as a subtest. Each subtest opens its own
// store, so they are independent and most run in parallel.
func Run(t *testing.T, h Harness) {
	if h.Open == nil || h.Reopen == nil || h.Merges == nil {
		t.Fatal("storetest: Harness.Open, Reopen and Merges are all required")
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
		// serial tests measure process-wide allocation and must not share
		// the process with parallel subtests.
		serial bool
	}{
		{name: "RoundTrip_AllFields", fn: testRoundTrip},
		{name: "RoundTrip_CommonProps", fn: testCommonProps},
		{name: "Write_BadCommonProps", fn: testBadCommon},
		{name: "Write_Empty", fn: testWriteEmpty},
		{name: "Write_Counts", fn: testWriteCounts},
		{name: "Dedup_WithinWrite", fn: testDedupWithinWrite},
		{name: "Dedup_AcrossWrites", fn: testDedupAcrossWrites},
		{name: "Dedup_AcrossReopen", fn: testDedupAcrossReopen},
		{name: "Dedup_ProjectIsPartOfKey", fn: testDedupProjects},
		{name: "Dedup_NoInsertIDNeverDeduplicated", fn: testNoInsertID},
		{name: "Dedup_FirstCopyWins", fn: testFirstCopyWins},
		{name: "Merges_StoredAndSurviveReopen", fn: testMerges},
		{name: "Write_Concurrent", fn: testConcurrentWrites},
		{name: "Write_CancelledContext", fn: testCancelledWrite},
		{name: "Scan_RangeBoundaries", fn: testScanRange},
		{name: "Scan_NameFilter", fn: testScanNames},
		{name: "Scan_Limit", fn: testScanLimit},
		{name: "Scan_Order", fn: testScanOrder},
		{name: "Scan_ProjectIsolation", fn: testScanProjects},
		{name: "Scan_FnErrorStops", fn: testScanFnError},
		{name: "Scan_CancelledContext", fn: testScanCancelled},
		{name: "Identity_OriginalMerge", fn: testOriginalMerge},
		{name: "Identity_ClusterLimit", fn: testClusterLimit},
		{name: "Identity_SimplifiedLink", fn: testSimplifiedLink},
		{name: "Identity_ModeChangeRefused", fn: testModeChange},
		{name: "Profiles_Operators", fn: testProfileOperators},
		{name: "Profiles_Groups", fn: testGroupProfiles},
		{name: "Profiles_ManyInOneWrite", fn: testProfilesManyInOneWrite},
		{name: "Profiles_FollowIdentity", fn: testProfilesFollowIdentity},
		{name: "Lookup_Replace", fn: testLookupReplace},
		{name: "Lookup_StreamRollback", fn: testLookupStreamRollback},
		{name: "Lookup_StreamReadersSeeOneVersion", fn: testLookupStreamReaders},
		{name: "Lookup_Change", fn: testLookupChange},
		{name: "Sync_Checkpoints", fn: testCheckpoints},
		{name: "Sync_OneRunPerImport", fn: testRunsOnePerImport},
		{name: "Sync_ConcurrentStart", fn: testRunsConcurrentStart},
		{name: "Sync_HourlyLimit", fn: testRunsLimit},
		{name: "Sync_History", fn: testRunsHistory},
		{name: "Sync_Leases", fn: testRunLeases},
		{name: "Sync_LeasesReapOnce", fn: testRunLeasesReapOnce},
		{name: "Sync_ImportDocs", fn: testImportDocs},
		{name: "Alerts_EndRunAndOutbox", fn: testAlertsEndRun},
		{name: "Usage_Counts", fn: testUsageCounts},
		{name: "Usage_SurviveReopen", fn: testUsageReopen},
		{name: "Usage_Concurrent", fn: testUsageConcurrent},
		{name: "Usage_Daily", fn: testDailyUsage},
		{name: "Members_Ownership", fn: testMembersOwnership},
		{name: "Members_Paging", fn: testMembersPaging},
		{name: "Import_DeleteEvents", fn: testDeleteImportEvents},
		{name: "Mirror_State", fn: testMirrorState},
		{name: "Mirror_Sources", fn: testMirrorSources},
		{name: "History_Versions", fn: testHistoryVersions},
		{name: "Ledger_HistoryQuarantinePrune", fn: testLedger},
		{name: "Ledger_PruneMidRun", fn: testLedgerPruneMidRun},
		{name: "Write_DupEvents", fn: testWriteDupEvents},
		{name: "Shared_Tokens", fn: testSharedTokens},
		{name: "Shared_Rate", fn: testSharedRate},
		{name: "Ping", fn: testPing},
		{name: "Closed", fn: testClosed},
		{name: "Scan_LargeStreams", fn: testLargeScan, serial: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.serial {
				t.Parallel()
			}
			tc.fn(t, h)
		})
	}
}

// handle tracks the current store of a subtest across reopens so cleanup
// closes whichever one is live.
type handle struct {
	h Harness
	s store.Store
}

func open(t *testing.T, h Harness) *handle {
	t.Helper()
	hd := &handle{h: h, s: h.Open(t)}
	t.Cleanup(func() {
		if err := hd.s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return hd
}

func (hd *handle) reopen(t *testing.T) {
	t.Helper()
	hd.s = hd.h.Reopen(t, hd.s)
}

// NewEvent builds an event with its Key computed by store.DedupKey, as every
// producer must. IngestMs is derived from timeMs so it is distinct per event
// and round trips can check it.
func NewEvent(project int64, name, distinctID string, timeMs int64, insertID, props string) store.Event {
	return store.Event{
		Name:       name,
		DistinctID: distinctID,
		TimeMs:     timeMs,
		InsertID:   insertID,
		Props:      []byte(props),
		IngestMs:   timeMs + 7,
		Key:        store.DedupKey(project, name, distinctID, timeMs, insertID),
	}
}

// GenEvents builds n distinct dedupable events of about 300 bytes each,
// with times baseMs, baseMs+1, ..., named from a small set of names.
func GenEvents(project int64, n int, baseMs int64) []store.Event {
	names := [...]string{"page_view", "signup", "purchase", "click"}
	evs := make([]store.Event, n)
	for i := range evs {
		props := fmt.Sprintf(`{"i":%d,"plan":"pro","country":"FR","path":"/docs/page-%d","referrer":"https://example.com/?q=%d","pad":"%0200d"}`, i, i%97, i, i)
		evs[i] = NewEvent(project, names[i%len(names)], fmt.Sprintf("user-%d", i%1000),
			baseMs+int64(i), fmt.Sprintf("ins-%d-%d", baseMs, i), props)
	}
	return evs
}

// Collect runs q and returns deep copies of the events, because the store
// may reuse the *Event and its buffers between calls.
func Collect(t testing.TB, s store.Store, q store.Scan) []store.Event {
	t.Helper()
	var out []store.Event
	err := s.ScanEvents(context.Background(), q, func(e *store.Event) error {
		c := *e
		c.Props = bytes.Clone(e.Props)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatalf("scan %+v: %v", q, err)
	}
	return out
}

func mustWrite(t testing.TB, s store.Store, batches ...store.Batch) store.WriteResult {
	t.Helper()
	res, err := s.Write(context.Background(), batches)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	checkResultShape(t, res, batches)
	return res
}

// checkResultShape verifies the per-batch counts add up to the totals and
// that every record of every batch is accounted for.
func checkResultShape(t testing.TB, res store.WriteResult, batches []store.Batch) {
	t.Helper()
	if len(res.Batches) != len(batches) {
		t.Fatalf("result has %d batch entries, want %d", len(res.Batches), len(batches))
	}
	var sum store.WriteResult
	for i, b := range res.Batches {
		// Rejected records are accounted for by their Ref.
		rejected := map[int]bool{}
		for _, r := range b.Rejected {
			rejected[r.Ref] = true
		}
		droppedEvents, rejectedMerges := 0, 0
		for _, c := range batches[i].Changes {
			if c.Event >= 0 && rejected[c.Ref] {
				droppedEvents++
			}
		}
		for _, m := range batches[i].Merges {
			if rejected[m.Ref] {
				rejectedMerges++
			}
		}
		if b.Inserted+b.Duplicates+droppedEvents != len(batches[i].Events) {
			t.Errorf("batch %d: inserted %d + duplicates %d + rejected %d != %d events", i, b.Inserted, b.Duplicates, droppedEvents, len(batches[i].Events))
		}
		if b.Merges+rejectedMerges != len(batches[i].Merges) {
			t.Errorf("batch %d: merges %d + rejected %d, want %d", i, b.Merges, rejectedMerges, len(batches[i].Merges))
		}
		if b.Batches != nil {
			t.Errorf("batch %d: nested Batches must be nil", i)
		}
		sum.Inserted += b.Inserted
		sum.Duplicates += b.Duplicates
		sum.Merges += b.Merges
	}
	if sum.Inserted != res.Inserted || sum.Duplicates != res.Duplicates || sum.Merges != res.Merges {
		t.Errorf("per-batch sums %+v differ from totals %d/%d/%d", sum, res.Inserted, res.Duplicates, res.Merges)
	}
}

func wantCounts(t testing.TB, got store.WriteResult, inserted, duplicates, merges int) {
	t.Helper()
	if got.Inserted != inserted || got.Duplicates != duplicates || got.Merges != merges {
		t.Errorf("counts = inserted %d, duplicates %d, merges %d; want %d, %d, %d",
			got.Inserted, got.Duplicates, got.Merges, inserted, duplicates, merges)
	}
}

// all scans a project's whole time range.
func all(project int64) store.Scan {
	return store.Scan{Project: project, FromMs: -1 << 62, ToMs: 1 << 62}
}

// requireEvents compares every field; Key only matters for dedupable events.
func requireEvents(t testing.TB, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d\ngot:  %s\nwant: %s", len(got), len(want), summary(got), summary(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.DistinctID != w.DistinctID || g.TimeMs != w.TimeMs ||
			g.InsertID != w.InsertID || g.IngestMs != w.IngestMs || !bytes.Equal(g.Props, w.Props) {
			t.Fatalf("event %d:\ngot  %+v props=%q\nwant %+v props=%q", i, g, g.Props, w, w.Props)
		}
		if w.Dedupable() && g.Key != w.Key {
			t.Fatalf("event %d: key %x, want %x", i, g.Key, w.Key)
		}
	}
}

func summary(evs []store.Event) string {
	var b bytes.Buffer
	for i, e := range evs {
		if i == 20 {
			fmt.Fprintf(&b, "… (%d more)", len(evs)-i)
			break
		}
		fmt.Fprintf(&b, "[%s %s t=%d id=%q] ", e.Name, e.DistinctID, e.TimeMs, e.InsertID)
	}
	return b.String()
}
