package duckstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// usageTable reads usage_counters as "month source" → events for project 1.
func usageTable(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.Query(`SELECT month, source, events FROM usage_counters WHERE project = 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var m, src string
		var n int64
		if err := rows.Scan(&m, &src, &n); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[m+" "+src]; dup {
			t.Fatalf("usage_counters has two rows for %s %s", m, src)
		}
		out[m+" "+src] = n
	}
	return out
}

func usageMem(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	rows, err := s.Usage(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Month+" "+r.Source] = r.Events
	}
	return out
}

func sameCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestUsageExactAcrossReplay: counts ride the write log. A loader commit
// that fails is retried without adding twice; entries a process left
// unapplied are added once by the next Open's replay, and not again by
// the loader afterwards.
func TestUsageExactAcrossReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.duckdb")
	s := openAt(t, path)
	ctx := context.Background()
	at := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC).UnixMilli()
	batch := func(n int, base int64, src string) store.Batch {
		evs := storetest.GenEvents(1, n, base)
		for i := range evs {
			evs[i].IngestMs = at
		}
		return store.Batch{Project: 1, Source: src, Events: evs}
	}
	// A failed loader transaction, then its retry.
	fails := 1
	s.beforeCommit = func(*duckdb.Conn) error {
		if fails > 0 {
			fails--
			return errors.New("injected failure before commit")
		}
		return nil
	}
	if _, err := s.Write(ctx, []store.Batch{batch(100, 0, store.SourceImport), batch(40, 10_000, store.SourceTrack)}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"2026-11 import": 100, "2026-11 track": 40}
	if got := usageTable(t, s); !sameCounts(got, want) {
		t.Fatalf("table after a retried load: %v, want %v", got, want)
	}
	// Now the loader never commits: the next writes stay in the log only,
	// yet readers count them at once.
	s.beforeCommit = func(*duckdb.Conn) error { return errors.New("loader down") }
	if _, err := s.Write(ctx, []store.Batch{batch(25, 20_000, store.SourceImport)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, []store.Batch{batch(25, 20_000, store.SourceAmplitude), batch(5, 30_000, store.SourceAmplitude)}); err != nil {
		t.Fatal(err) // the first batch is all duplicates
	}
	want["2026-11 import"] += 25
	want["2026-11 amplitude"] = 5
	if got := usageMem(t, s); !sameCounts(got, want) {
		t.Fatalf("counters before the loader applied: %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Logf("close with a failing loader: %v", err)
	}
	s = openAt(t, path) // replays the two unapplied entries
	defer s.Close()
	if got := usageMem(t, s); !sameCounts(got, want) {
		t.Fatalf("counters after replay: %v, want %v", got, want)
	}
	if _, err := s.Write(ctx, []store.Batch{batch(1, 40_000, store.SourceImport)}); err != nil {
		t.Fatal(err)
	}
	want["2026-11 import"]++
	if got := usageTable(t, s); !sameCounts(got, want) {
		t.Fatalf("table after replay and one more write: %v, want %v", got, want)
	}
	if got := usageMem(t, s); !sameCounts(got, want) {
		t.Fatalf("counters after replay and one more write: %v, want %v", got, want)
	}
}
