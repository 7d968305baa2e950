package storetest

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func testScanRange(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 10, 100) // times 100..109
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs})
	cases := []struct {
		from, to int64
		want     []store.Event
	}{
		{100, 110, evs},
		{100, 101, evs[:1]},  // FromMs inclusive
		{101, 109, evs[1:9]}, // ToMs exclusive
		{109, 110, evs[9:]},  // last one alone
		{105, 105, nil},      // empty range
		{110, 200, nil},      // after everything
		{0, 100, nil},        // ends right before the first
		{-1 << 62, 103, evs[:3]},
	}
	for _, c := range cases {
		got := Collect(t, hd.s, store.Scan{Project: 1, FromMs: c.from, ToMs: c.to})
		if len(got) != len(c.want) {
			t.Fatalf("[%d,%d): got %d events, want %d", c.from, c.to, len(got), len(c.want))
		}
		requireEvents(t, got, c.want)
	}
}

func testScanNames(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 40, 0) // names cycle page_view, signup, purchase, click
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs})
	pick := func(names ...string) []store.Event {
		var out []store.Event
		for _, e := range evs {
			for _, n := range names {
				if e.Name == n {
					out = append(out, e)
				}
			}
		}
		return out
	}
	q := all(1)
	q.Events = []string{"signup"}
	requireEvents(t, Collect(t, hd.s, q), pick("signup"))
	q.Events = []string{"click", "page_view"}
	requireEvents(t, Collect(t, hd.s, q), pick("page_view", "click"))
	q.Events = []string{"no such event"}
	requireEvents(t, Collect(t, hd.s, q), nil)
	// Names are exact, not patterns or prefixes.
	q.Events = []string{"sign%", "SIGNUP", "sign"}
	requireEvents(t, Collect(t, hd.s, q), nil)
}

func testScanLimit(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 30, 0)
	// Store in reverse so a limit that ignores the ordering shows up.
	rev := make([]store.Event, len(evs))
	for i, e := range evs {
		rev[len(evs)-1-i] = e
	}
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: rev})
	q := all(1)
	q.Limit = 5
	requireEvents(t, Collect(t, hd.s, q), evs[:5])
	q.Limit = 1000
	requireEvents(t, Collect(t, hd.s, q), evs)
	q = store.Scan{Project: 1, FromMs: 10, ToMs: 30, Events: []string{"purchase"}, Limit: 2}
	requireEvents(t, Collect(t, hd.s, q), []store.Event{evs[10], evs[14]})
}

func testScanOrder(t *testing.T, h Harness) {
	hd := open(t, h)
	// Equal times must come back in arrival order, across batches, writes and restarts.
	a := NewEvent(1, "a", "u", 50, "a", `{}`)
	b := NewEvent(1, "b", "u", 50, "", `{}`)
	c := NewEvent(1, "c", "u", 50, "c", `{}`)
	early := NewEvent(1, "early", "u", 10, "early", `{}`)
	d := NewEvent(1, "d", "u", 50, "d", `{}`)
	late := NewEvent(1, "late", "u", 90, "late", `{}`)
	e := NewEvent(1, "e", "u", 50, "e", `{}`)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{late, a, b}}, store.Batch{Project: 1, Events: []store.Event{c}})
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{early, d}})
	hd.reopen(t)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{e}})
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{early, a, b, c, d, e, late})
}

func testScanProjects(t *testing.T, h Harness) {
	hd := open(t, h)
	p1 := GenEvents(1, 20, 0)
	p2 := GenEvents(2, 20, 0) // same fields, other project
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: p1}, store.Batch{Project: 2, Events: p2[:10]})
	mustWrite(t, hd.s, store.Batch{Project: 2, Events: p2[10:]})
	requireEvents(t, Collect(t, hd.s, all(1)), p1)
	requireEvents(t, Collect(t, hd.s, all(2)), p2)
	requireEvents(t, Collect(t, hd.s, all(3)), nil)
}

func testScanFnError(t *testing.T, h Harness) {
	hd := open(t, h)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: GenEvents(1, 100, 0)})
	stop := errors.New("stop here")
	calls := 0
	err := hd.s.ScanEvents(context.Background(), all(1), func(*store.Event) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("scan returned %v, want the callback's error", err)
	}
	if calls != 3 {
		t.Fatalf("callback called %d times after returning an error at call 3", calls)
	}
	// The store must still work after an aborted scan.
	if n := len(Collect(t, hd.s, all(1))); n != 100 {
		t.Fatalf("scan after aborted scan: %d events, want 100", n)
	}
}

func testScanCancelled(t *testing.T, h Harness) {
	hd := open(t, h)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: GenEvents(1, 5000, 0)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := hd.s.ScanEvents(ctx, all(1), func(*store.Event) error {
		calls++
		if calls == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("scan with context cancelled mid-way returned %v after %d calls, want context.Canceled", err, calls)
	}
	if calls >= 5000 {
		t.Fatalf("scan delivered all %d events despite cancellation", calls)
	}
}

// testLargeScan checks that scans stream: stopping early must cost a small
// fraction of the allocations of a full scan. An implementation that builds
// the result in memory before calling fn allocates the full amount either way.
func testLargeScan(t *testing.T, h Harness) {
	if testing.Short() {
		t.Skip("writes 200k events")
	}
	hd := open(t, h)
	const n, per = 200_000, 20_000
	for start := 0; start < n; start += per {
		mustWrite(t, hd.s, store.Batch{Project: 1, Events: GenEvents(1, per, int64(start))})
	}
	allocs := func(stopAfter int) (calls int, bytes uint64) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		errStop := errors.New("stop")
		last := int64(-1 << 62)
		err := hd.s.ScanEvents(context.Background(), all(1), func(e *store.Event) error {
			if e.TimeMs <= last {
				t.Fatalf("event %d out of order: time %d after %d", calls, e.TimeMs, last)
			}
			last = e.TimeMs
			if len(e.Props) < 200 || e.Props[0] != '{' {
				t.Fatalf("event %d: props %q", calls, e.Props)
			}
			calls++
			if calls == stopAfter {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			t.Fatalf("scan: %v", err)
		}
		runtime.ReadMemStats(&after)
		return calls, after.TotalAlloc - before.TotalAlloc
	}
	calls, full := allocs(0)
	if calls != n {
		t.Fatalf("full scan delivered %d events, want %d", calls, n)
	}
	calls, early := allocs(1000)
	if calls != 1000 {
		t.Fatalf("early-stopped scan delivered %d events, want 1000", calls)
	}
	t.Logf("allocated %d bytes for a full scan of %d events, %d bytes for the first 1000", full, n, early)
	if early*10 > full {
		t.Fatalf("stopping after 1000 of %d events allocated %d bytes vs %d for all: the scan is not streaming", n, early, full)
	}
}
