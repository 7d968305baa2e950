package amplitude

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// errTooManyEvents stops a job or dry run that reaches MaxEvents.
var errTooManyEvents = errors.New("too many events")

// loader moves exported lines into a project: transform, validate exactly
// as POST /import does (record.Decoder, strict), write through the store in
// batches. Without a store it is a dry run that only counts.
//
// load runs it as a pipeline: this goroutine writes batches, in the order
// their lines were read, while one reader fills chunks of lines and
// GOMAXPROCS workers transform and validate them. The store write and
// everything that follows it (counts, failures, the profile spill) stay on
// one goroutine and in line order, so a run does exactly what a serial one
// would. Memory is workers+2+queuedWrites batches (taken from, and kept
// between jobs by, the service's chunkPool) plus the profile spill's
// budget.
type loader struct {
	project   int64
	token     string
	store     Writer // nil: dry run
	now       func() time.Time
	batchSize int
	// maxEvents refuses a migration at that many exported events; before
	// is what earlier ranges exported.
	maxEvents, before int64
	// workers transform and validate in parallel; 0: GOMAXPROCS, at
	// most maxWorkers.
	workers int

	chunks *chunkPool // the service's, shared with its other loaders
	cur    *chunk     // line and flush: the batch being filled

	prof  *profileSpill // nil in a dry run
	pst   *profileState
	users map[uint64]struct{} // dry run: distinct user ids, hashed
	seed  maphash.Seed

	c Counts // since the last take
	// progress, when set, sees the counts after every batch.
	progress func(Counts)
}

// maxWorkers bounds the default number of workers.
const maxWorkers = 4

// queuedWrites is how many prepared batches may wait for the store write.
// A write returns when its log entry is on disk, and while the store's
// loader writes its tables on the same disk a flush can take tens of
// milliseconds: with no batch queued behind it the reader and the workers
// soon had no free chunk and idled. BenchmarkMigration on 2 cores, six
// alternated rounds: 3 queued beat none in 6 of 6 rounds into an open
// store (+7 % on average) and 4 of 6 into a fresh one (+4 %). A chunk
// holds about 20 MB at the default batch size (7 chunks: 138 MB of heap
// after a 60,000-event load).
const queuedWrites = 3

// recState is what became of one record of a batch.
type recState uint8

const (
	recStored   recState = iota
	recInvalid           // refused by the decoder: no event in the batch
	recRejected          // refused by the store: its event is in the batch
)

func newLoader(chunks *chunkPool, projectID int64, token string, st Writer, now func() time.Time, batchSize int) *loader {
	return &loader{
		chunks:  chunks,
		project: projectID, token: token, store: st, now: now, batchSize: batchSize,
		seed: maphash.MakeSeed(),
	}
}

// take returns the counts since the last take and starts afresh.
func (l *loader) take() Counts {
	c := l.c
	l.c = Counts{}
	return c
}

func (l *loader) failed(f Failure) {
	l.c.EventsFailed++
	l.c.fail(f)
}

// options are those of POST /import with a project secret, for a
// Simplified ID Merge project: $user_id / $device_id make distinct_id.
func (l *loader) options() record.Options {
	// UniqueNames: the transform claims every property name it writes
	// (reserved names first), so a record never repeats one.
	return record.Options{Project: l.project, Token: l.token, Strict: true, Now: l.now(), Mode: identity.Simplified,
		Canonical: true, UniqueNames: true}
}

// load takes every line lines yields and writes them; on return the
// batches are durable (or counted, in a dry run). A failing read still
// writes the batches read before it, as a serial run would.
func (l *loader) load(ctx context.Context, lines func(LineFunc) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := l.workers
	if workers <= 0 {
		// Beyond a few workers the single store writer is the bottleneck,
		// and each worker holds a batch in memory.
		workers = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	// One filling, one writing, one per worker, and queuedWrites prepared
	// ones waiting for the writer.
	n := workers + 2 + queuedWrites
	free := make(chan *chunk, n)
	for range n {
		free <- l.chunks.get()
	}
	// Each channel holds every chunk, so no send below ever blocks.
	todo, done := make(chan *chunk, n), make(chan *chunk, n)
	var readErr error
	go func() {
		defer close(todo)
		readErr = l.read(ctx, lines, free, todo)
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range todo {
				c.prepare()
				done <- c
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	var err error
	waiting := make(map[int]*chunk, n)
	next := 0
	for c := range done {
		waiting[c.seq] = c
		for c := waiting[next]; c != nil; c = waiting[next] {
			delete(waiting, next)
			next++
			if err == nil {
				if err = l.commit(ctx, c); err != nil {
					cancel() // stop reading; the workers drain what is queued
				}
			}
			c.reset()
			free <- c
		}
	}
	// done is closed: the workers and the reader have finished, and every
	// chunk is back in free.
	for range n {
		l.chunks.put(<-free)
	}
	if err != nil {
		return err
	}
	return readErr
}

// read fills chunks of batchSize lines and queues them in order.
func (l *loader) read(ctx context.Context, lines func(LineFunc) error, free chan *chunk, todo chan<- *chunk) error {
	base := l.before + l.c.EventsExported
	var exported int64
	var c *chunk
	seq := 0
	send := func() error {
		c.seq, c.opt = seq, l.options()
		seq++
		select {
		case todo <- c:
			c = nil
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := lines(func(loc Location, b []byte) error {
		exported++
		if l.maxEvents > 0 && base+exported >= l.maxEvents {
			return errTooManyEvents
		}
		if c == nil {
			select {
			case c = <-free:
			case <-ctx.Done():
				return ctx.Err()
			}
			c.want = l.batchSize
		}
		c.add(loc, b)
		c.exported++
		if c.len() >= l.batchSize {
			return send()
		}
		return nil
	})
	if err == nil && c != nil {
		err = send()
	}
	if c != nil {
		c.reset()
		free <- c
	}
	return err
}

// line and flush are load one line at a time, on this goroutine: for
// benchmarks of the transform and validation alone.
func (l *loader) line(ctx context.Context, loc Location, b []byte) error {
	l.c.EventsExported++
	if l.maxEvents > 0 && l.before+l.c.EventsExported >= l.maxEvents {
		return errTooManyEvents
	}
	if l.cur == nil {
		l.cur = l.chunks.get()
		l.cur.want = l.batchSize
	}
	l.cur.add(loc, b)
	if l.cur.len() >= l.batchSize {
		return l.flush(ctx)
	}
	return nil
}

func (l *loader) flush(ctx context.Context) error {
	c := l.cur
	if c == nil {
		return nil
	}
	l.cur = nil
	defer l.chunks.put(c)
	c.opt = l.options()
	c.prepare()
	return l.commit(ctx, c)
}

// commit writes a prepared chunk and accounts for it. On return the batch
// is durable (or counted, in a dry run).
func (l *loader) commit(ctx context.Context, c *chunk) error {
	l.c.EventsExported += c.exported
	for _, f := range c.fails {
		l.failed(f)
	}
	if l.store != nil && len(c.batch.Events) > 0 {
		res, err := l.store.Write(ctx, []store.Batch{c.batch})
		if err != nil {
			return fmt.Errorf("write events: %w", err)
		}
		l.c.EventsImported += int64(res.Inserted + res.Duplicates)
		l.c.EventsDuplicate += int64(res.Duplicates)
		for _, rj := range res.Rejected {
			c.state[rj.Ref] = recRejected
			l.failed(Failure{Location: c.rlocs[rj.Ref], Message: rj.Err.Error()})
		}
	} else if l.store == nil {
		l.c.EventsImported += int64(len(c.batch.Events))
	}
	if err := l.observeUsers(c); err != nil {
		return err
	}
	if l.progress != nil {
		l.progress(l.c)
	}
	return nil
}

// observeUsers feeds the batch's stored events to the profile spill (or
// the dry run's user count). Only events the decoder attributed to their
// user_id count: a placeholder user id ("undefined") falls back to the
// device, and must not get a profile.
func (l *loader) observeUsers(c *chunk) error {
	j := 0
	for i := range c.recs {
		if c.state[i] == recInvalid {
			continue
		}
		ev := &c.batch.Events[j]
		j++
		if c.state[i] == recRejected {
			continue
		}
		user := c.evs[i].user.of(c.side)
		if len(user) == 0 || ev.DistinctID != b2s(user) {
			continue
		}
		if l.prof == nil {
			if l.users == nil {
				l.users = make(map[uint64]struct{})
			}
			l.users[maphash.Bytes(l.seed, user)] = struct{}{}
			continue
		}
		if err := l.prof.observe(l.pst, user, ev.TimeMs, ev.InsertID, c.evs[i].props.of(c.side)); err != nil {
			return err
		}
	}
	return nil
}
