package duckstore

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestSmallLoadChunks loads through many INSERTs per loader transaction,
// as a small memory budget makes it, and reopens to the same rows.
func TestSmallLoadChunks(t *testing.T) {
	opt := testOptions
	opt.LoadChunkBytes = 4096 // a few dozen events per INSERT
	path := filepath.Join(t.TempDir(), "c.duckdb")
	s := openWith(t, path, opt)
	if s.chunkBytes != 4096 {
		t.Fatalf("chunk bytes %d, want 4096", s.chunkBytes)
	}
	const n = 20_000
	for start := 0; start < n; start += 5_000 {
		evs := storetest.GenEvents(1, 5_000, int64(start))
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
			t.Fatal(err)
		}
	}
	requireCounts(t, s, n, 0)
	// A second write of the same events is all duplicates.
	res, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: storetest.GenEvents(1, 5_000, 0)}})
	if err != nil || res.Duplicates != 5_000 {
		t.Fatalf("rewrite: %+v %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openWith(t, path, testOptions)
	defer s.Close()
	if s.chunkBytes != arrowChunkBytes {
		t.Fatalf("default chunk bytes %d, want %d", s.chunkBytes, arrowChunkBytes)
	}
	requireCounts(t, s, n, 0)
}

func TestNegativeLoadChunkBytes(t *testing.T) {
	opt := testOptions
	opt.LoadChunkBytes = -1
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "c.duckdb"), opt)
	if err == nil || !strings.Contains(err.Error(), "LoadChunkBytes must not be negative, got -1") {
		t.Fatalf("error %v", err)
	}
}

// TestLoadTxnRows: a loader transaction ends once it holds LoadTxnRows
// rows, at an entry's end. The first commit is held until five
// 1,000-event writes are in the log, so the loader then finds four
// entries waiting: one transaction each with the limit, one for all
// four without.
func TestLoadTxnRows(t *testing.T) {
	for _, tc := range []struct {
		txnRows, wantCommits int
	}{{1000, 5}, {0, 2}} {
		opt := testOptions
		opt.LoadTxnRows = tc.txnRows
		s := openWith(t, filepath.Join(t.TempDir(), "t.duckdb"), opt)
		release := make(chan struct{})
		var commits atomic.Int32
		s.beforeCommit = func(*duckdb.Conn) error {
			if commits.Add(1) == 1 {
				<-release
			}
			return nil
		}
		for i := range 5 {
			evs := storetest.GenEvents(1, 1000, int64(i*1000))
			if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
				t.Fatal(err)
			}
		}
		close(release)
		requireCounts(t, s, 5000, 0)
		if got := commits.Load(); int(got) != tc.wantCommits {
			t.Fatalf("LoadTxnRows %d: %d loader commits, want %d", tc.txnRows, got, tc.wantCommits)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	opt := testOptions
	opt.LoadTxnRows = -1
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "n.duckdb"), opt); err == nil ||
		!strings.Contains(err.Error(), "LoadTxnRows must not be negative, got -1") {
		t.Fatalf("error %v", err)
	}
}
