package duckstore

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
// rows, at an entry's end. The first commit, begun with the first
// write alone, is held until five 1,000-event writes are in the log, so
// the loader then finds four entries waiting: one transaction each with
// the limit, one for all four without. A loader gathering full
// transactions (as it does unless gatherWait is 0) makes the same five
// with the limit, and one for all five without: nothing is applied
// until the count below waits for the loader.
func TestLoadTxnRows(t *testing.T) {
	for _, tc := range []struct {
		txnRows, wantCommits int
		gather               bool
	}{{1000, 5, false}, {0, 2, false}, {1000, 5, true}, {0, 1, true}} {
		// Every case but the last commits the first write alone; the
		// writes after it wait until that commit has begun, since a
		// loader scheduled late would otherwise take several at once.
		firstAlone := tc.wantCommits > 1
		opt := testOptions
		opt.LoadTxnRows = tc.txnRows
		s := openWith(t, filepath.Join(t.TempDir(), "t.duckdb"), opt)
		s.gatherWait = 0 // apply at every wake
		if tc.gather {
			s.gatherWait = time.Hour // only a full transaction or a waiter moves the loader
		}
		release, begun := make(chan struct{}), make(chan struct{})
		var commits atomic.Int32
		s.beforeCommit = func(*duckdb.Conn) error {
			if commits.Add(1) == 1 {
				close(begun)
				<-release
			}
			return nil
		}
		for i := range 5 {
			evs := storetest.GenEvents(1, 1000, int64(i*1000))
			if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: evs}}); err != nil {
				t.Fatal(err)
			}
			if i == 0 && firstAlone {
				select {
				case <-begun:
				case <-time.After(10 * time.Second):
					t.Fatalf("LoadTxnRows %d, gather %v: first write not applied in 10s", tc.txnRows, tc.gather)
				}
			}
		}
		close(release)
		requireCounts(t, s, 5000, 0)
		if got := commits.Load(); int(got) != tc.wantCommits {
			t.Fatalf("LoadTxnRows %d, gather %v: %d loader commits, want %d", tc.txnRows, tc.gather, got, tc.wantCommits)
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

// TestLoaderGathers: the loader applies a transaction once a full one is
// in the log (a row group, or LoadTxnRows when less), or what there is
// when someone waits for it or gatherWait passes; never a few rows at
// every write.
func TestLoaderGathers(t *testing.T) {
	write := func(t *testing.T, s *Store, i int) {
		t.Helper()
		if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: storetest.GenEvents(1, 1000, int64(i*1000))}}); err != nil {
			t.Fatal(err)
		}
	}
	waitCommits := func(t *testing.T, commits *atomic.Int32, want int32) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); commits.Load() < want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d loader commits after 10s, want %d", commits.Load(), want)
			}
		}
	}
	t.Run("full transaction or waiter", func(t *testing.T) {
		opt := testOptions
		opt.LoadTxnRows = 3000
		s := openWith(t, filepath.Join(t.TempDir(), "t.duckdb"), opt)
		defer s.Close()
		s.gatherWait = time.Hour
		var commits atomic.Int32
		s.beforeCommit = func(*duckdb.Conn) error { commits.Add(1); return nil }
		write(t, s, 0)
		write(t, s, 1)
		// Time for a loader that applied at every write to show it.
		time.Sleep(100 * time.Millisecond)
		if got := commits.Load(); got != 0 {
			t.Fatalf("%d loader commits with 2,000 of 3,000 rows logged, want 0", got)
		}
		write(t, s, 2)
		waitCommits(t, &commits, 1) // a full transaction: nobody waits for it
		write(t, s, 3)
		requireCounts(t, s, 4000, 0) // Sync waits for the loader: the last 1,000 go at once
		if got := commits.Load(); got != 2 {
			t.Fatalf("%d loader commits, want 2", got)
		}
	})
	t.Run("gather wait", func(t *testing.T) {
		s := openWith(t, filepath.Join(t.TempDir(), "t.duckdb"), testOptions)
		defer s.Close()
		s.gatherWait = 20 * time.Millisecond
		var commits atomic.Int32
		s.beforeCommit = func(*duckdb.Conn) error { commits.Add(1); return nil }
		write(t, s, 0)
		waitCommits(t, &commits, 1) // far from a full transaction, applied after gatherWait
	})
}

// A string column is sized for a whole chunk once projectAfter rows show
// their average, within the chunk's byte limit: a fresh store's columns
// are then allocated a few times, not at every doubling.
func TestStrColProjects(t *testing.T) {
	row := bytes.Repeat([]byte("p"), 100)
	for _, limit := range []int{arrowChunkBytes, 4 << 20} {
		var c strCol
		c.reset()
		grows, last := 0, cap(c.data)
		for rows := 0; rows < arrowChunkRows && len(c.data)+len(row) <= limit; rows++ {
			c.add(row, rows, limit)
			if cap(c.data) != last {
				grows, last = grows+1, cap(c.data)
			}
		}
		whole := 100 * arrowChunkRows
		if want := min(whole, limit); len(c.data) < want-100 {
			t.Fatalf("limit %d: %d bytes in; want %d", limit, len(c.data), want)
		}
		if cap(c.data) > min(whole+whole/8, limit+100) {
			t.Fatalf("limit %d: capacity %d beyond the projected chunk", limit, cap(c.data))
		}
		// Doubling from 4 KB to ~100 KB, then one step to the projection.
		if grows > 7 {
			t.Fatalf("limit %d: the column grew %d times", limit, grows)
		}
	}
}

// The loader gathers a row group of the file's size, or LoadTxnRows when
// that is less, or twice LoaderLagBytes of log for rows too large to fill
// a row group within it.
func TestGatherRows(t *testing.T) {
	for _, tc := range []struct{ txnRows, rowGroup, want int }{
		{0, 0, RowGroupRows}, {0, 4096, 4096}, {3000, 0, 3000}, {3000, 2048, 2048},
	} {
		opt := testOptions
		opt.LoadTxnRows, opt.RowGroupRows = tc.txnRows, tc.rowGroup
		s := openWith(t, filepath.Join(t.TempDir(), "t.duckdb"), opt)
		if s.gatherRows != int64(tc.want) {
			t.Errorf("LoadTxnRows %d, RowGroupRows %d: gathers %d rows, want %d", tc.txnRows, tc.rowGroup, s.gatherRows, tc.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := openWith(t, filepath.Join(t.TempDir(), "p.duckdb"), testOptions)
	defer s.Close()
	s.gatherWait = time.Hour // only a full transaction or a waiter moves the loader
	var commits atomic.Int32
	s.beforeCommit = func(*duckdb.Conn) error { commits.Add(1); return nil }
	s.applyMu.Lock()
	s.paceFrom = 8 << 10 // 16 KB of log is a transaction of few large rows
	s.applyMu.Unlock()
	big := storetest.GenEvents(1, 10, 0)
	for i := range big {
		big[i].Props = []byte(`{"pad":"` + strings.Repeat("x", 4<<10) + `"}`)
	}
	if _, err := s.Write(context.Background(), []store.Batch{{Project: 1, Events: big}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); commits.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("10 rows of 4 KB, twice LoaderLagBytes: not applied in 10s")
		}
	}
}
