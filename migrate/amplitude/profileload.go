package amplitude

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// profileBatch is how many profile updates go into one store write.
const profileBatch = 1000

// profileChunk is one store write of profiles, and the users whose update
// was refused before it (in merge order, as a serial load meets them).
type profileChunk struct {
	ups   []store.ProfileUpdate
	fails []Failure
}

// loadProfiles writes one $set per user from the user's latest event, with
// $time = that event's time, so $last_seen is the user's last activity and
// a repeated load writes the same profile.
//
// The runs are merged and the updates parsed on a goroutine of their own,
// one batch ahead of the store: a write returns when its log entry is on
// disk, and the next batch is ready by then instead of being parsed after
// it. Failures and counts arrive in the order a serial load gives them.
func (s *Service) loadProfiles(ctx context.Context, jr *jobRun, dir string, runs []profileRun, project int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Two chunks: one being filled while the other is written.
	free, full := make(chan *profileChunk, 2), make(chan *profileChunk, 2)
	free <- &profileChunk{}
	free <- &profileChunk{}
	var mergeErr error
	go func() {
		defer close(full)
		mergeErr = parseProfiles(ctx, dir, runs, free, full)
	}()
	var c Counts
	var err error
	batch := store.Batch{Project: project}
	for pc := range full {
		if err != nil {
			continue // drain: the producer stops at ctx
		}
		c.ProfilesFailed += int64(len(pc.fails))
		for _, f := range pc.fails {
			c.fail(f)
		}
		if len(pc.ups) > 0 {
			batch.Profiles = pc.ups
			res, werr := s.cfg.Store.Write(ctx, []store.Batch{batch})
			if werr != nil {
				err = fmt.Errorf("write profiles: %w", werr)
				cancel()
				continue
			}
			c.ProfilesUpdated += int64(res.Profiles)
			for _, rj := range res.Rejected {
				c.ProfilesFailed++
				c.fail(Failure{Field: "$set", Message: "user " + pc.ups[rj.Ref].DistinctID + ": " + rj.Err.Error()})
			}
		}
		jr.mu.Lock()
		jr.live = Counts{ProfilesUpdated: c.ProfilesUpdated, ProfilesFailed: c.ProfilesFailed}
		jr.mu.Unlock()
		clear(pc.ups) // do not pin the last batch's updates
		pc.ups, pc.fails = pc.ups[:0], pc.fails[:0]
		free <- pc
	}
	if err == nil {
		err = mergeErr
	}
	if err != nil {
		return err
	}
	jr.mu.Lock()
	jr.job.Counts.add(c)
	jr.live = Counts{}
	jr.mu.Unlock()
	return nil
}

// parseProfiles merges the runs into updates, profileBatch to a chunk
// taken from free and sent to full; the last chunk goes even when it holds
// only failures.
func parseProfiles(ctx context.Context, dir string, runs []profileRun, free <-chan *profileChunk, full chan<- *profileChunk) error {
	ps := profile.Parser{NoToken: true}
	var buf []byte
	var pc *profileChunk
	take := func() error {
		if pc != nil {
			return nil
		}
		select {
		case pc = <-free:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := mergeRuns(dir, runs, func(user []byte, ms int64, _, props []byte) error {
		if err := take(); err != nil {
			return err
		}
		buf = append(buf[:0], `{"$distinct_id":`...)
		buf = jsonw.String(buf, b2s(user))
		buf = append(buf, `,"$time":`...)
		buf = strconv.AppendInt(buf, ms, 10)
		buf = append(buf, `,"$set":`...)
		if len(props) == 0 {
			buf = append(buf, "{}"...)
		} else {
			buf = append(buf, props...)
		}
		buf = append(buf, '}')
		u, err := ps.ParseUser(buf)
		if err != nil {
			field, msg := "", err.Error()
			if fe, ok := errors.AsType[*profile.FieldError](err); ok {
				field, msg = fe.Field, fe.Message
			}
			pc.fails = append(pc.fails, Failure{Field: field, Message: "user " + string(user) + ": " + msg})
			return nil
		}
		pc.ups = append(pc.ups, store.ProfileUpdate{Update: u, Ref: len(pc.ups)})
		if len(pc.ups) >= profileBatch {
			full <- pc // full holds every chunk: never blocks
			pc = nil
		}
		return nil
	})
	if err == nil && pc != nil && (len(pc.ups) > 0 || len(pc.fails) > 0) {
		full <- pc
	}
	return err
}
