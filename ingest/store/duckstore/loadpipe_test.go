package duckstore

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

// TestFailedPipelinedLoadLeavesNothing fails a loader transaction made of
// many INSERTs, some run on the pipe's goroutine while the next chunk
// fills: once in the third pipelined INSERT, once before COMMIT after all
// of them. Either way the tables keep nothing of it, and the retry applies
// the acknowledged write exactly once.
func TestFailedPipelinedLoadLeavesNothing(t *testing.T) {
	for _, at := range []string{"insert", "commit"} {
		t.Run(at, func(t *testing.T) {
			opt := testOptions
			opt.LoadChunkBytes = 64 << 10 // a few hundred events per INSERT
			s := openWith(t, filepath.Join(t.TempDir(), "p.duckdb"), opt)
			defer s.Close()
			ctx := context.Background()
			boom := errors.New("injected failure")
			failed, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			inserts := 0
			fail := func(n int) error {
				var err error
				if n >= 3 {
					once.Do(func() { err = boom; close(failed) })
				}
				if err == nil && n >= 3 {
					<-release // hold the retry until the table has been checked
				}
				return err
			}
			if at == "insert" {
				s.pipe.beforeInsert = func() error { inserts++; return fail(inserts) }
			} else {
				s.beforeCommit = func(*duckdb.Conn) error { return fail(3) }
			}
			evs := storetest.GenEvents(1, 50_000, 0)
			merges := []store.Merge{{DistinctIDs: [2]string{"a", "b"}, Props: []byte(`{}`)}}
			res, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs, Merges: merges}})
			if err != nil || res.Inserted != len(evs) {
				t.Fatalf("write: %+v, %v", res, err)
			}
			<-failed
			var ne, nm int
			if err := s.db.QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM merges)`).Scan(&ne, &nm); err != nil || ne != 0 || nm != 0 {
				t.Fatalf("after the failed load: %d events, %d merges (err %v), want none", ne, nm, err)
			}
			close(release)
			requireCounts(t, s, len(evs), 1)
			if at == "insert" && inserts < 10 {
				t.Fatalf("only %d pipelined INSERTs: the test did not overlap loads", inserts)
			}
			if again, err := s.Write(ctx, []store.Batch{{Project: 1, Events: evs}}); err != nil || again.Duplicates != len(evs) {
				t.Fatalf("rewrite: %+v %v", again, err)
			}
		})
	}
}
