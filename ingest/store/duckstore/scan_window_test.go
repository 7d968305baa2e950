package duckstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestConformanceWindowedScans runs the suite with every scan taking the
// windowed way. Its pages are 2,048 rows: each windowed page reads the
// range again, so the suite's 200k-event stream in 3-row pages would take
// hours; TestWindowedScanMatchesSorted crosses small pages.
func TestConformanceWindowedScans(t *testing.T) {
	h := harness(2048)
	open, reopen := h.Open, h.Reopen
	h.Open = func(t testing.TB) store.Store {
		s := open(t)
		s.(*Store).windowedScans = true
		return s
	}
	h.Reopen = func(t testing.TB, s store.Store) store.Store {
		r := reopen(t, s)
		r.(*Store).windowedScans = true
		return r
	}
	storetest.Run(t, h)
}

// Windowed scans in 3-row pages deliver what sorted ones do: many events
// at one time (a window of its own, walked by several pages), windows
// cut between ties, limits, name filters and sub-ranges.
func TestWindowedScanMatchesSorted(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	s.scanPage = 3
	var evs []store.Event
	for i := range 400 {
		tm := int64(i % 37) // ties: ~11 events at each time
		if i%5 == 0 {
			tm = 20 // one crowded time
		}
		evs = append(evs, storetest.NewEvent(1, []string{"a", "b", "c"}[i%3], fmt.Sprint("u", i%7), tm*1000, fmt.Sprint("ins-", i), fmt.Sprintf(`{"i":%d}`, i)))
	}
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.Scan{
		{Project: 1, FromMs: 0, ToMs: 1 << 40},
		{Project: 1, FromMs: 0, ToMs: 1 << 40, Limit: 50},
		{Project: 1, FromMs: 0, ToMs: 1 << 40, Limit: 3},
		{Project: 1, FromMs: 5000, ToMs: 30000, Events: []string{"a", "c"}},
		{Project: 1, FromMs: 20000, ToMs: 21000, Limit: 70},
		{Project: 2, FromMs: 0, ToMs: 1 << 40},
	} {
		s.windowedScans = false
		want := storetest.Collect(t, s, q)
		s.windowedScans = true
		got := storetest.Collect(t, s, q)
		if len(got) != len(want) {
			t.Fatalf("%+v: windowed scan delivered %d events, sorted %d", q, len(got), len(want))
		}
		for i := range want {
			if got[i].InsertID != want[i].InsertID || !bytes.Equal(got[i].Props, want[i].Props) {
				t.Fatalf("%+v: event %d is %s windowed, %s sorted", q, i, got[i].InsertID, want[i].InsertID)
			}
		}
	}
}

// A range too large for DuckDB to sort within its memory_limit is still
// exported whole, in order, once: the scan goes on in windows from where
// the sort gave up. The old scan failed here with "Out of Memory Error".
func TestScanOutOfMemoryFallsBackToWindows(t *testing.T) {
	var logs lockedBuf
	s := openWith(t, filepath.Join(t.TempDir(), "x.duckdb"), Options{MemoryLimit: "16MB", Threads: 2,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	const n, per = 300_000, 50_000
	for start := 0; start < n; start += per {
		evs := make([]store.Event, per)
		for i := range evs {
			j := start + i
			// Times out of arrival order, so no page is a prefix of the
			// table, four events at each, so pages end inside ties.
			evs[i] = storetest.NewEvent(1, "e", fmt.Sprint("u", j%1000), int64(j*7919%n/4)*3, fmt.Sprint("ins-", j),
				fmt.Sprintf(`{"j":%d,"pad":"%0300d"}`, j, j))
		}
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
			t.Fatal(err)
		}
	}
	var got, prev int64 = 0, -1
	seen := make(map[string]bool, n)
	err := s.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 50}, func(e *store.Event) error {
		if e.TimeMs < prev || seen[e.InsertID] {
			return fmt.Errorf("event %d (%s) at %d after %d: out of order or repeated", got, e.InsertID, e.TimeMs, prev)
		}
		prev, seen[e.InsertID] = e.TimeMs, true
		got++
		return nil
	})
	if err != nil {
		t.Fatalf("scan after %d events: %v", got, err)
	}
	if got != n {
		t.Fatalf("scanned %d events, want %d", got, n)
	}
	if !strings.Contains(logs.String(), "reading it in windows") {
		t.Fatalf("the sort did not run out of memory, so the fallback was not exercised (raise n); logs:\n%s", logs.String())
	}
}

// An error of the caller's fn ends the scan even when it wraps DuckDB's
// Out of Memory (an export's history lookup can run out of memory too):
// falling back would resume after the row fn refused and lose it.
func TestScanFnOutOfMemoryIsNotRetried(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "x.duckdb"))
	defer s.Close()
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: storetest.GenEvents(1, 20, 0)}}); err != nil {
		t.Fatal(err)
	}
	oom := fmt.Errorf("history: %w", &duckdb.Error{Type: duckdb.ErrorTypeOutOfMemory, Msg: "Out of Memory Error: injected"})
	calls := 0
	err := s.ScanEvents(context.Background(), store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 40}, func(e *store.Event) error {
		calls++
		if calls == 5 {
			return oom
		}
		return nil
	})
	if !errors.Is(err, oom) || calls != 5 {
		t.Fatalf("scan returned %v after %d calls, want fn's own error after 5", err, calls)
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
