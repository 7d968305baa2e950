package amplitude

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// errTooManyEvents stops a job or dry run that reaches MaxEvents.
var errTooManyEvents = errors.New("too many events")

// loader moves exported lines into a project: transform, validate exactly
// as POST /import does (record.Decoder, strict), write through the store in
// batches. Without a store it is a dry run that only counts. Memory is one
// batch of records plus the profile spill's budget.
type loader struct {
	project   int64
	token     string
	store     store.Store // nil: dry run
	now       func() time.Time
	batchSize int
	// maxEvents refuses a migration at that many exported events; before
	// is what earlier ranges exported.
	maxEvents, before int64

	tr    *transformer
	dec   record.Decoder
	buf   []byte // the batch's records, back to back
	ends  []int
	side  []byte // user ids and user properties, see amplitudeEvent
	evs   []amplitudeEvent
	locs  []Location
	recs  [][]byte
	batch store.Batch
	state []recState // per record of the batch

	prof  *profileSpill // nil in a dry run
	pst   *profileState
	users map[uint64]struct{} // dry run: distinct user ids, hashed
	seed  maphash.Seed

	c Counts // since the last take
	// progress, when set, sees the counts after every batch.
	progress func(Counts)
}

// recState is what became of one record of a batch.
type recState uint8

const (
	recStored   recState = iota
	recInvalid           // refused by the decoder: no event in the batch
	recRejected          // refused by the store: its event is in the batch
)

func newLoader(projectID int64, token string, st store.Store, now func() time.Time, batchSize int) *loader {
	return &loader{
		project: projectID, token: token, store: st, now: now, batchSize: batchSize,
		tr: newTransformer(), seed: maphash.MakeSeed(),
	}
}

// take returns the counts since the last take and starts afresh.
func (l *loader) take() Counts {
	c := l.c
	l.c = Counts{}
	return c
}

func (l *loader) failed(loc Location, iid, field, msg string) {
	l.c.EventsFailed++
	l.c.fail(Failure{Location: loc, InsertID: iid, Field: field, Message: msg})
}

// line takes one exported line (nil: a line over MaxLineBytes).
func (l *loader) line(ctx context.Context, loc Location, b []byte) error {
	l.c.EventsExported++
	if l.maxEvents > 0 && l.before+l.c.EventsExported >= l.maxEvents {
		return errTooManyEvents
	}
	if b == nil {
		l.failed(loc, "", "", fmt.Sprintf("event too large: over %d bytes", MaxLineBytes))
		return nil
	}
	start, sideStart := len(l.buf), len(l.side)
	var ev amplitudeEvent
	var ferr *fieldError
	l.buf, l.side, ferr = l.tr.appendRecord(l.buf, l.side, b, &ev)
	if ferr != nil {
		l.buf, l.side = l.buf[:start], l.side[:sideStart]
		l.failed(loc, "", ferr.field, ferr.msg)
		return nil
	}
	if n := len(l.buf) - start; n > record.DefaultLimits().MaxEventBytes {
		l.buf, l.side = l.buf[:start], l.side[:sideStart]
		l.failed(loc, "", "", fmt.Sprintf("%v: the record is %d bytes; /import allows %d", record.ErrEventTooLarge, n, record.DefaultLimits().MaxEventBytes))
		return nil
	}
	l.ends = append(l.ends, len(l.buf))
	l.evs = append(l.evs, ev)
	l.locs = append(l.locs, loc)
	if len(l.ends) >= l.batchSize {
		return l.flush(ctx)
	}
	return nil
}

// flush validates and writes the batch. On return the batch is durable
// (or counted, in a dry run) and the buffers are empty.
func (l *loader) flush(ctx context.Context) error {
	if len(l.ends) == 0 {
		return nil
	}
	l.recs = l.recs[:0]
	start := 0
	for _, end := range l.ends {
		l.recs = append(l.recs, l.buf[start:end])
		start = end
	}
	l.batch = store.Batch{Source: store.SourceAmplitude, Events: l.batch.Events[:0], Changes: l.batch.Changes[:0]}
	// The same options as POST /import with a project secret, for a
	// Simplified ID Merge project: $user_id / $device_id make distinct_id.
	fails := l.dec.Decode(record.Options{
		Project: l.project, Token: l.token, Strict: true, Now: l.now(), Mode: identity.Simplified,
	}, l.recs, &l.batch)
	l.state = append(l.state[:0], make([]recState, len(l.recs))...)
	for _, f := range fails {
		l.state[f.Index] = recInvalid
		l.failed(l.locs[f.Index], f.InsertID, f.Field, f.Message)
	}
	if l.store != nil && len(l.batch.Events) > 0 {
		res, err := l.store.Write(ctx, []store.Batch{l.batch})
		if err != nil {
			return fmt.Errorf("write events: %w", err)
		}
		l.c.EventsImported += int64(res.Inserted + res.Duplicates)
		l.c.EventsDuplicate += int64(res.Duplicates)
		for _, rj := range res.Rejected {
			l.state[rj.Ref] = recRejected
			l.failed(l.locs[rj.Ref], "", "", rj.Err.Error())
		}
	} else if l.store == nil {
		l.c.EventsImported += int64(len(l.batch.Events))
	}
	if err := l.observeUsers(); err != nil {
		return err
	}
	l.buf, l.ends, l.side, l.evs, l.locs = l.buf[:0], l.ends[:0], l.side[:0], l.evs[:0], l.locs[:0]
	l.dec.Reset()
	if l.progress != nil {
		l.progress(l.c)
	}
	return nil
}

// observeUsers feeds the batch's stored events to the profile spill (or
// the dry run's user count). Only events the decoder attributed to their
// user_id count: a placeholder user id ("undefined") falls back to the
// device, and must not get a profile.
func (l *loader) observeUsers() error {
	j := 0
	for i := range l.recs {
		if l.state[i] == recInvalid {
			continue
		}
		ev := &l.batch.Events[j]
		j++
		if l.state[i] == recRejected {
			continue
		}
		user := l.evs[i].user.of(l.side)
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
		if err := l.prof.observe(l.pst, user, ev.TimeMs, ev.InsertID, l.evs[i].props.of(l.side)); err != nil {
			return err
		}
	}
	return nil
}
