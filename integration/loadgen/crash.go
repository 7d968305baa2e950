package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver

	"github.com/tributary-dev/tributary/internal/duckarrow"
)

// With -restart kill, the server is killed (SIGKILL) while connections
// are still posting, right after the preload (its loader still behind),
// and at the end the store is read back: every event that a 200 answered
// must be there exactly once. That is the crash test at the store's full
// size; the CI crash tests cover the same at a small one.

// crashWindow is how long the connections post before the kill.
const crashWindow = 5 * time.Second

// bitset is a fixed set of sequence numbers, safe for concurrent set.
type bitset struct{ w []atomic.Uint64 }

func newBitset(n int64) *bitset { return &bitset{w: make([]atomic.Uint64, (n+63)/64)} }

func (b *bitset) set(i int64) {
	if i >= 0 && i < int64(len(b.w))*64 {
		b.w[i/64].Or(1 << (i % 64))
	}
}

func (b *bitset) has(i int64) bool {
	return i >= 0 && i < int64(len(b.w))*64 && b.w[i/64].Load()&(1<<(i%64)) != 0
}

// crashImport posts fresh batches to t from o.conns connections for
// crashWindow, then kills the server and starts it again (returning the
// restart time). Events of batches answered 200 are marked in acked, of
// the others in unacked.
func crashImport(c *http.Client, t target, srv *child, gen *generator, o options, acked, unacked *bitset) (crashRun, error) {
	var stop atomic.Bool
	var ackedEvents atomic.Int64
	var wg sync.WaitGroup
	for range o.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && gen.next()+int64(o.batch) < int64(len(acked.w))*64 {
				// Every event sent is marked in unacked; a 200 marks it in acked too.
				first, body := gen.batchAt(o.batch, unacked)
				status, imported, err := t.post(c, body, false)
				if err != nil || status != http.StatusOK {
					return // the server is gone: the kill came
				}
				ackedEvents.Add(int64(imported))
				markBatch(gen, first, o.batch, acked)
			}
		}()
	}
	time.Sleep(crashWindow)
	// Killed with requests in flight; the connections end at their error
	// (the restarted server listens on another port).
	peakKB, _ := srv.status("VmHWM")
	took, err := srv.Restart(true)
	stop.Store(true)
	wg.Wait()
	return crashRun{restart: took, peakKB: peakKB, acked: int(ackedEvents.Load())}, err
}

// markBatch marks in set the events of the batch that started at first:
// generating it again is the one way to learn which earlier events it
// re-sent, and costs the driver only a few ms per acknowledged batch.
func markBatch(gen *generator, first int64, n int, set *bitset) {
	again := &generator{run: gen.run, base: gen.base, spanMs: gen.spanMs, liveMs: gen.liveMs,
		preload: gen.preload, dup: gen.dup, seq: first}
	again.batchSeqs(n, set)
}

// crashCheck is what checkStored found.
type crashCheck struct {
	rows, ackedMissing, duplicated, unknown, unackedStored, unackedSent int64
}

func (r crashCheck) ok() bool { return r.ackedMissing == 0 && r.duplicated == 0 && r.unknown == 0 }

// checkStored reads the run's insert ids back from the stopped server's
// database file: each must be there at most once, each acknowledged one
// at least once. Events of the empty-store baseline (another run id) are
// not looked at.
func checkStored(dataDir, run string, limit int64, acked, unacked *bitset) (crashCheck, error) {
	var res crashCheck
	db, err := sql.Open("duckdb", filepath.Join(dataDir, "tributary.duckdb")+"?access_mode=read_only&memory_limit=512MB")
	if err != nil {
		return res, err
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("open the store's database: %w", err)
	}
	defer conn.Close()
	seen := newBitset(limit)
	err = conn.Raw(func(dc any) error {
		dconn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		ar, err := duckarrow.New(dconn)
		if err != nil {
			return err
		}
		prefix := "lg-" + run + "-"
		rdr, err := ar.QueryContext(ctx, fmt.Sprintf(`SELECT CAST(insert_id[%d:] AS BIGINT) FROM events WHERE starts_with(insert_id, '%s')`,
			len(prefix)+1, prefix))
		if err != nil {
			return err
		}
		defer rdr.Release()
		for rdr.Next() {
			col, ok := rdr.RecordBatch().Column(0).(*array.Int64)
			if !ok {
				return fmt.Errorf("unexpected column %T", rdr.RecordBatch().Column(0))
			}
			for _, seq := range col.Int64Values() {
				res.rows++
				switch {
				case seq < 0 || seq >= limit:
					res.unknown++
				case seen.has(seq):
					res.duplicated++
				default:
					seen.set(seq)
				}
			}
		}
		return rdr.Err()
	})
	if err != nil {
		return res, fmt.Errorf("read the stored insert ids: %w", err)
	}
	for seq := int64(0); seq < limit; seq++ {
		isAcked := acked.has(seq)
		if isAcked && !seen.has(seq) {
			res.ackedMissing++
		}
		if !isAcked && unacked.has(seq) {
			res.unackedSent++
			if seen.has(seq) {
				res.unackedStored++
			}
		}
	}
	return res, nil
}

// crashSeqs bounds the sequence numbers the crash window may hand out
// beyond the preload's (the bitsets' size): 5 s at 1M events/s, twice.
const crashSeqs = 10_000_000

// crashRun is what crashImport measured.
type crashRun struct {
	restart time.Duration // from the new process's start to listening
	peakKB  int64         // the killed process's peak RSS
	acked   int           // events acknowledged in the crash window
}

// afterCrash ends a -restart kill run: once the measured phase is loaded,
// a clean restart (timed), then a graceful stop and the check of the
// stored events. It returns the check, the clean restart's time and the
// peak RSS of the process started after the kill.
func afterCrash(c *http.Client, t *target, srv *child, gen *generator, acked, unacked *bitset) (*crashCheck, time.Duration, int64, error) {
	if _, err := waitLoaded(c, *t); err != nil {
		return nil, 0, 0, fmt.Errorf("before the clean restart: %w", err)
	}
	peakKB, _ := srv.status("VmHWM")
	took, err := srv.Restart(false)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("clean restart: %w", err)
	}
	t.base = srv.URL
	if _, err := waitLoaded(c, *t); err != nil {
		return nil, 0, 0, fmt.Errorf("after the clean restart: %w", err)
	}
	srv.Halt()
	fmt.Println("checking the stored events...")
	start := time.Now()
	check, err := checkStored(filepath.Join(srv.Dir, "data"), gen.run, gen.next(), acked, unacked)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("crash check: %w", err)
	}
	fmt.Printf("  read %d stored events of this run in %s\n", check.rows, time.Since(start).Round(time.Millisecond))
	return &check, took, peakKB, nil
}
