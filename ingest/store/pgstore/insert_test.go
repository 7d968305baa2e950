package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

func TestSeqBlocks(t *testing.T) {
	blocks := []int64{1, 2049, 5 * seqBlock}
	for i := range 3 * seqBlock {
		seq := seqOf(blocks, i)
		if got, ok := stageIndex(blocks, seq); !ok || got != i {
			t.Fatalf("stageIndex(seqOf(%d) = %d) = %d, %v", i, seq, got, ok)
		}
	}
	for _, seq := range []int64{0, 1 + seqBlock, 5*seqBlock - 1, 6 * seqBlock} {
		if i, ok := stageIndex(blocks, seq); ok {
			t.Fatalf("stageIndex(%d) = %d, want none", seq, i)
		}
	}
}

// TestSlowPathAcrossSeqBlocks writes events that are partly stored already,
// so the write takes the ON CONFLICT path, across several seq blocks and
// batches: counts per batch, and the scan's arrival order for equal times,
// must come out as on the fast path.
func TestSlowPathAcrossSeqBlocks(t *testing.T) {
	dsn, schema := testSchema(t)
	s := openTest(t, dsn, schema, defaultPages())
	defer s.Close()
	ctx := context.Background()
	const n = 3*seqBlock + 17
	evs := storetest.GenEvents(1, n, 1000)
	for i := range evs {
		// Pairs of equal times: the second of each was sent later.
		evs[i].TimeMs = 1000 + int64(i/2)
		evs[i].Key = store.DedupKey(1, evs[i].Name, evs[i].DistinctID, evs[i].TimeMs, evs[i].InsertID)
	}
	old := make([]store.Event, 0, n/2)
	for i := 1; i < n; i += 3 {
		old = append(old, evs[i])
	}
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: old}}); err != nil {
		t.Fatal(err)
	}
	half := n / 2
	res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs[:half]}, {Project: 1, Events: evs[half:]}})
	if err != nil {
		t.Fatal(err)
	}
	for bi, part := range [][]store.Event{evs[:half], evs[half:]} {
		dups := 0
		for _, e := range part {
			for _, o := range old {
				if o.Key == e.Key {
					dups++
					break
				}
			}
		}
		if got := res.Batches[bi]; got.Inserted != len(part)-dups || got.Duplicates != dups {
			t.Fatalf("batch %d: inserted %d, duplicates %d; want %d, %d", bi, got.Inserted, got.Duplicates, len(part)-dups, dups)
		}
	}
	// Arrival order: the old events first among equal times, then request order.
	want := make([]store.Event, 0, n)
	isOld := map[store.Key]bool{}
	for _, o := range old {
		isOld[o.Key] = true
	}
	for i := 0; i < n; i += 2 {
		pair := evs[i:min(i+2, n)]
		for _, e := range pair {
			if isOld[e.Key] {
				want = append(want, e)
			}
		}
		for _, e := range pair {
			if !isOld[e.Key] {
				want = append(want, e)
			}
		}
	}
	got := storetest.Collect(t, s, store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 50})
	if len(got) != len(want) {
		t.Fatalf("scan returned %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key {
			t.Fatalf("event %d: %q, want %q", i, got[i].InsertID, want[i].InsertID)
		}
	}
}

// TestFastPathWaitsForInFlightKey has a write's COPY meet a key that
// another open transaction inserted: it must wait, and once that commits,
// count the key as a duplicate and store the rest.
func TestFastPathWaitsForInFlightKey(t *testing.T) {
	dsn, schema := testSchema(t)
	s := openTest(t, dsn, schema, defaultPages())
	defer s.Close()
	ctx := context.Background()
	evs := storetest.GenEvents(1, 100, 1000)
	if _, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs[:1]}}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rollback(ctx, tx)
	e := evs[50]
	if _, err := tx.Exec(ctx, `INSERT INTO events (project, time_ms, name, distinct_id, insert_id, dedup_key, props, ingest_ms)
		VALUES (1, $1, $2, $3, $4, $5, '{}', 0)`, e.TimeMs, e.Name, e.DistinctID, e.InsertID, pgtype.UUID{Bytes: e.Key, Valid: true}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res store.WriteResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}})
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("write did not wait for the open transaction: %+v, %v", r.res, r.err)
	case <-waitFor(ctx, t, s, tx):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Inserted != 98 || r.res.Duplicates != 2 {
		t.Fatalf("inserted %d, duplicates %d; want 98, 2", r.res.Inserted, r.res.Duplicates)
	}
	if got := storetest.Collect(t, s, store.Scan{Project: 1, FromMs: 0, ToMs: 1 << 50}); len(got) != 100 {
		t.Fatalf("stored %d events, want 100", len(got))
	}
}

// waitFor closes its channel once a backend waits for a lock that tx's
// backend holds.
func waitFor(ctx context.Context, t *testing.T, s *testStore, tx pgx.Tx) <-chan struct{} {
	t.Helper()
	var pid int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			var n int
			err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
			if err != nil || n > 0 {
				return
			}
		}
	}()
	return ch
}
