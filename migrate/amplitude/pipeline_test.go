package amplitude

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

// recordingStore keeps copies of what is written; only Write is used.
type recordingStore struct {
	store.Store
	writes [][]store.Event
}

func (r *recordingStore) Write(_ context.Context, batches []store.Batch) (store.WriteResult, error) {
	var evs []store.Event
	res := store.WriteResult{}
	for _, b := range batches {
		for _, e := range b.Events {
			e.Props = slices.Clone(e.Props)
			evs = append(evs, e)
		}
		res.Inserted += len(b.Events)
		res.Batches = append(res.Batches, store.WriteResult{Inserted: len(b.Events)})
	}
	r.writes = append(r.writes, evs)
	return res, nil
}

// The parallel load does exactly what the serial line-by-line path does:
// the same store writes with the same events in the same order, the same
// counts and failures in the same order, the same users for the profiles.
func TestLoadParallelMatchesSerial(t *testing.T) {
	raw, err := os.ReadFile("testdata/events.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for i := range 40 {
		for l := range bytes.SplitSeq(raw, []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				lines = append(lines, l)
			}
		}
		lines = append(lines, nil) // over MaxLineBytes
		lines = append(lines, benchLine(i, hour(1, 0).Add(time.Duration(i)*time.Minute)))
	}
	feed := func(fn LineFunc) error {
		for i, l := range lines {
			if err := fn(Location{File: "f", Line: i + 1}, l); err != nil {
				return err
			}
		}
		return nil
	}
	type outcome struct {
		counts   Counts
		writes   [][]store.Event
		users    []string
		progress []Counts
	}
	run := func(parallel bool, batch int) outcome {
		ctx := context.Background()
		st := &recordingStore{}
		l := newLoader(newChunkPool(time.Minute), 1, "tok", st, func() time.Time { return testNow }, batch)
		l.workers = 3
		l.prof, l.pst = newProfileSpill(t.TempDir(), 64<<20), &profileState{}
		var progress []Counts
		l.progress = func(c Counts) {
			c.Failures = slices.Clone(c.Failures)
			progress = append(progress, c)
		}
		if parallel {
			if err := l.load(ctx, feed); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := feed(func(loc Location, b []byte) error { return l.line(ctx, loc, b) }); err != nil {
				t.Fatal(err)
			}
			if err := l.flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		o := outcome{counts: l.take(), writes: st.writes, progress: progress}
		for u, latest := range l.prof.mem {
			o.users = append(o.users, u+" "+string(latest.iid)+" "+string(latest.props))
		}
		slices.Sort(o.users)
		return o
	}
	for _, batch := range []int{1, 3, 7, 50, 5000} {
		serial, parallel := run(false, batch), run(true, batch)
		if serial.counts.EventsFailed == 0 || serial.counts.EventsImported == 0 || len(serial.users) == 0 {
			t.Fatalf("batch %d: fixture exercises too little: %+v", batch, serial.counts)
		}
		if !reflect.DeepEqual(serial, parallel) {
			t.Fatalf("batch %d: parallel %+v\nserial %+v", batch, parallel.counts, serial.counts)
		}
		if serial.counts.EventsExported != int64(len(lines)) {
			t.Fatalf("batch %d: exported %d of %d", batch, serial.counts.EventsExported, len(lines))
		}
	}
}

// A read that fails stops the load with its error, after the batches
// read before it are written, like a serial run.
func TestLoadReadError(t *testing.T) {
	ctx := context.Background()
	st := &recordingStore{}
	l := newLoader(newChunkPool(time.Minute), 1, "tok", st, func() time.Time { return testNow }, 2)
	l.maxEvents = 6
	err := l.load(ctx, func(fn LineFunc) error {
		for i := range 100 {
			if err := fn(Location{Line: i + 1}, benchLine(i, hour(1, 0))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != errTooManyEvents {
		t.Fatalf("err %v", err)
	}
	if n := len(st.writes); n != 2 {
		t.Fatalf("%d writes before the limit; want 2", n)
	}
	// Every chunk went back to the pool, for the next range.
	if want := min(runtime.GOMAXPROCS(0), maxWorkers) + 2 + queuedWrites; l.chunks.idle() != want {
		t.Fatalf("pool %d; want %d", l.chunks.idle(), want)
	}
}

// A profile spill that fails stops the load with its error, and every
// chunk still goes back to the pool.
func TestLoadSpillError(t *testing.T) {
	ctx := context.Background()
	st := &recordingStore{}
	l := newLoader(newChunkPool(time.Minute), 1, "tok", st, func() time.Time { return testNow }, 2)
	// A budget of one byte spills at the first user, into a directory
	// that does not exist.
	l.prof, l.pst = newProfileSpill(filepath.Join(t.TempDir(), "gone"), 1), &profileState{}
	err := l.load(ctx, func(fn LineFunc) error {
		for i := range 100 {
			if err := fn(Location{Line: i + 1}, benchLine(i, hour(1, 0))); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "profile spill") {
		t.Fatalf("err %v", err)
	}
	if want := min(runtime.GOMAXPROCS(0), maxWorkers) + 2 + queuedWrites; l.chunks.idle() != want {
		t.Fatalf("pool %d; want %d", l.chunks.idle(), want)
	}
}
