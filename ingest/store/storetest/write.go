package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func testRoundTrip(t *testing.T, h Harness) {
	hd := open(t, h)
	big := `{"blob":"` + strings.Repeat("x", 100_000) + `"}`
	want := []store.Event{
		NewEvent(1, "Signed Up", "user-1", 1_700_000_000_000, "a1", `{"plan":"pro","n":1}`),
		// JSON byte layout (spacing, escapes, key order, number text) must survive untouched.
		NewEvent(1, "page view", "", 1_700_000_000_001, "", "{ \"b\" : 1.50, \"a\":\"\\u00e9\\n\\\"q\\\"\" ,\"z\":[1,{\"y\":null}] }"),
		NewEvent(1, "Événement ✓", "ユーザー", 1_700_000_000_002, "ins-√", `{"emoji":"🎉","ü":"ß"}`),
		NewEvent(1, "old", "u", -86_400_000, "neg", `{}`),
		NewEvent(1, "far", "u", 253_402_300_799_999, "max", big),
	}
	want[1].IngestMs = 0 // zero must come back as zero, not NULL trouble
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: want})
	requireEvents(t, Collect(t, hd.s, all(1)), sortedByTime(want))

	hd.reopen(t)
	requireEvents(t, Collect(t, hd.s, all(1)), sortedByTime(want))
}

// sortedByTime returns evs in scan order; the inputs have distinct times.
func sortedByTime(evs []store.Event) []store.Event {
	out := append([]store.Event(nil), evs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].TimeMs < out[j-1].TimeMs; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func testWriteEmpty(t *testing.T, h Harness) {
	hd := open(t, h)
	res, err := hd.s.Write(context.Background(), nil)
	if err != nil {
		t.Fatalf("empty write: %v", err)
	}
	wantCounts(t, res, 0, 0, 0)
	res = mustWrite(t, hd.s, store.Batch{Project: 1}, store.Batch{Project: 2})
	wantCounts(t, res, 0, 0, 0)
	if n := len(Collect(t, hd.s, all(1))); n != 0 {
		t.Fatalf("empty batches stored %d events", n)
	}
}

func testWriteCounts(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 10, 1000)
	m := store.Merge{DistinctIDs: [2]string{"a", "b"}, TimeMs: 5, IngestMs: 6, Props: []byte(`{}`)}
	res := mustWrite(t, hd.s,
		store.Batch{Project: 1, Events: evs[:6], Merges: []store.Merge{m}},
		store.Batch{Project: 1, Events: evs[4:10]}, // evs[4], evs[5] repeat batch 0
		store.Batch{Project: 1, Merges: []store.Merge{m, m}},
	)
	wantCounts(t, res, 10, 2, 3)
	wantCounts(t, res.Batches[0], 6, 0, 1)
	wantCounts(t, res.Batches[1], 4, 2, 0)
	wantCounts(t, res.Batches[2], 0, 0, 2)

	res = mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs[8:]}, store.Batch{Project: 1, Events: GenEvents(1, 3, 5000)})
	wantCounts(t, res, 3, 2, 0)
	wantCounts(t, res.Batches[0], 0, 2, 0)
	wantCounts(t, res.Batches[1], 3, 0, 0)
}

func testDedupWithinWrite(t *testing.T, h Harness) {
	hd := open(t, h)
	e := NewEvent(1, "e", "u", 100, "x", `{"copy":1}`)
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{e, e, e}}, store.Batch{Project: 1, Events: []store.Event{e}})
	wantCounts(t, res, 1, 3, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{e})
}

func testDedupAcrossWrites(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 100, 0)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs[:60]}), 60, 0, 0)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs}), 40, 60, 0)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs}), 0, 100, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), evs)
}

func testDedupAcrossReopen(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 50, 0)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs[:30]}), 30, 0, 0)
	hd.reopen(t)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs}), 20, 30, 0)
	hd.reopen(t)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs}), 0, 50, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), evs)
}

func testDedupProjects(t *testing.T, h Harness) {
	hd := open(t, h)
	a := NewEvent(1, "e", "u", 100, "same", `{"p":1}`)
	b := NewEvent(2, "e", "u", 100, "same", `{"p":2}`)
	if a.Key == b.Key {
		t.Fatal("DedupKey ignores the project")
	}
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{a}}, store.Batch{Project: 2, Events: []store.Event{b}})
	wantCounts(t, res, 2, 0, 0)
	res = mustWrite(t, hd.s, store.Batch{Project: 2, Events: []store.Event{b}}, store.Batch{Project: 1, Events: []store.Event{a}})
	wantCounts(t, res, 0, 2, 0)
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{a})
	requireEvents(t, Collect(t, hd.s, all(2)), []store.Event{b})
}

func testNoInsertID(t *testing.T, h Harness) {
	hd := open(t, h)
	e := NewEvent(1, "e", "u", 100, "", `{}`)
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{e, e}})
	wantCounts(t, res, 2, 0, 0)
	hd.reopen(t)
	res = mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{e}})
	wantCounts(t, res, 1, 0, 0)
	if got := Collect(t, hd.s, all(1)); len(got) != 3 {
		t.Fatalf("stored %d copies of an event without insert id, want 3", len(got))
	}
}

func testFirstCopyWins(t *testing.T, h Harness) {
	hd := open(t, h)
	first := NewEvent(1, "e", "u", 100, "x", `{"v":"first"}`)
	second := first
	second.Props = []byte(`{"v":"second"}`)
	second.IngestMs = 999
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{first, second}})
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{first})

	third := first
	third.Props = []byte(`{"v":"third"}`)
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: []store.Event{third}}), 0, 1, 0)
	hd.reopen(t)
	requireEvents(t, Collect(t, hd.s, all(1)), []store.Event{first})
}

func testMerges(t *testing.T, h Harness) {
	hd := open(t, h)
	ms := []store.Merge{
		{DistinctIDs: [2]string{"anon-1", "user-1"}, TimeMs: 10, IngestMs: 11, Props: []byte(`{"$distinct_ids":["anon-1","user-1"]}`)},
		{DistinctIDs: [2]string{"anon-2", "ユーザー"}, TimeMs: 5, IngestMs: 12, Props: []byte(`{ "x" : 1 }`)},
	}
	other := store.Merge{DistinctIDs: [2]string{"p2-a", "p2-b"}, TimeMs: 1, IngestMs: 2, Props: []byte(`{}`)}
	res := mustWrite(t, hd.s, store.Batch{Project: 1, Merges: ms}, store.Batch{Project: 2, Merges: []store.Merge{other}})
	wantCounts(t, res, 0, 0, 3)
	// Merges are records of what was sent, not deduplicated.
	res = mustWrite(t, hd.s, store.Batch{Project: 1, Merges: ms[:1]})
	wantCounts(t, res, 0, 0, 1)
	want := []store.Merge{ms[0], ms[1], ms[0]}

	check := func() {
		t.Helper()
		got := h.Merges(t, hd.s, 1)
		if len(got) != len(want) {
			t.Fatalf("project 1 has %d merges, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			if got[i].DistinctIDs != want[i].DistinctIDs || got[i].TimeMs != want[i].TimeMs ||
				got[i].IngestMs != want[i].IngestMs || string(got[i].Props) != string(want[i].Props) {
				t.Fatalf("merge %d = %+v, want %+v", i, got[i], want[i])
			}
		}
		if got := h.Merges(t, hd.s, 2); len(got) != 1 || got[0].DistinctIDs != other.DistinctIDs {
			t.Fatalf("project 2 merges = %+v", got)
		}
	}
	check()
	hd.reopen(t)
	check()
}

func testConcurrentWrites(t *testing.T, h Harness) {
	hd := open(t, h)
	const writers, distinct, perBatch = 16, 2000, 100
	evs := GenEvents(3, distinct, 0)
	var (
		mu    sync.Mutex
		total store.WriteResult
		wg    sync.WaitGroup
	)
	for g := range writers {
		wg.Go(func() {
			// Every writer sends every event, in its own order, plus events
			// of its own without insert id that must all be kept.
			mine := append([]store.Event(nil), evs...)
			rand.New(rand.NewPCG(uint64(g), 1)).Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
			for i := range 10 {
				mine = append(mine, NewEvent(3, "anon", fmt.Sprintf("w%d", g), int64(i), "", `{}`))
			}
			for start := 0; start < len(mine); start += perBatch {
				b := store.Batch{Project: 3, Events: mine[start:min(start+perBatch, len(mine))]}
				res, err := hd.s.Write(context.Background(), []store.Batch{b})
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
				mu.Lock()
				total.Inserted += res.Inserted
				total.Duplicates += res.Duplicates
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wantCounts(t, total, distinct+writers*10, (writers-1)*distinct, 0)

	got := Collect(t, hd.s, all(3))
	seen := make(map[store.Key]bool)
	anon := 0
	for _, e := range got {
		if !e.Dedupable() {
			anon++
			continue
		}
		if seen[e.Key] {
			t.Fatalf("event %q stored twice", e.InsertID)
		}
		seen[e.Key] = true
	}
	if len(seen) != distinct || anon != writers*10 {
		t.Fatalf("stored %d distinct dedupable + %d anonymous events, want %d + %d", len(seen), anon, distinct, writers*10)
	}
	for _, e := range evs {
		if !seen[e.Key] {
			t.Fatalf("event %q missing", e.InsertID)
		}
	}
}

func testCancelledWrite(t *testing.T, h Harness) {
	hd := open(t, h)
	evs := GenEvents(1, 500, 0)
	ms := []store.Merge{{DistinctIDs: [2]string{"a", "b"}, Props: []byte(`{}`)}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := hd.s.Write(ctx, []store.Batch{{Project: 1, Events: evs, Merges: ms}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("write with cancelled context: err = %v, want context.Canceled", err)
	}
	if n := len(Collect(t, hd.s, all(1))); n != 0 {
		t.Fatalf("cancelled write stored %d events", n)
	}
	if n := len(h.Merges(t, hd.s, 1)); n != 0 {
		t.Fatalf("cancelled write stored %d merges", n)
	}
	// The failed write must not have claimed the keys: all are new now.
	wantCounts(t, mustWrite(t, hd.s, store.Batch{Project: 1, Events: evs, Merges: ms}), 500, 0, 1)
	hd.reopen(t)
	requireEvents(t, Collect(t, hd.s, all(1)), evs)
}
