package amplitude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// execute runs a job from its last checkpoint to its end: every hour not
// done, range by range, then the profiles. Each range is fetched, its
// events written, and then checkpointed: hours done, counts and the
// profile runs are saved together, so after a crash the job continues at
// the first hour not done. Events of a range that a crash interrupted are
// written again and absorbed by dedup (their $insert_id is derived from
// the event itself), so the project holds one copy of each.
func (s *Service) execute(ctx context.Context, jr *jobRun) error {
	jr.mu.Lock()
	j := jr.job
	creds := jr.creds
	if j.StartedAt.IsZero() {
		j.StartedAt = s.cfg.Now().UTC()
	}
	if j.State == Queued {
		j.State = Exporting
	}
	snap := j.clone()
	jr.mu.Unlock()
	if err := s.cfg.Jobs.Save(ctx, &snap); err != nil {
		return err
	}
	project, ok := s.cfg.Projects.Project(snap.ProjectID)
	if !ok {
		return fmt.Errorf("project %d is no longer configured on this server", snap.ProjectID)
	}
	dir, err := s.cfg.Jobs.WorkDir(snap.ID)
	if err != nil {
		return err
	}
	pst := snap.Profiles
	removeOrphans(dir, &pst)

	if snap.State == Exporting {
		baseURL := s.cfg.BaseURL
		if snap.Region == "EU" {
			baseURL = s.cfg.EUBaseURL
		}
		l := newLoader(s.chunks, project.ID, project.Token, s.cfg.Store, s.cfg.Now, s.cfg.BatchSize)
		l.maxEvents = s.cfg.MaxEvents
		l.prof, l.pst = newProfileSpill(dir, s.cfg.ProfileMemory), &pst
		l.progress = func(c Counts) {
			jr.mu.Lock()
			jr.live = Counts{EventsExported: c.EventsExported, EventsImported: c.EventsImported,
				EventsDuplicate: c.EventsDuplicate, EventsFailed: c.EventsFailed}
			jr.mu.Unlock()
		}
		client := s.client(baseURL, creds)
		chunk := time.Duration(s.cfg.ChunkHours) * time.Hour
		span := func(cur time.Time) time.Time {
			to := cur.Truncate(chunk).Add(chunk - time.Hour) // UTC-day aligned when chunk divides a day
			if to.After(snap.End) {
				to = snap.End
			}
			return to
		}
		// The next range downloads while this one loads: a migration is
		// then as slow as the slower of Amplitude and the store, not both
		// added up. Only one range is fetched ahead (its archive waits on
		// disk, not in memory).
		ahead := prefetcher{client: client}
		defer ahead.stop()
		for cur, end := snap.cursor(), snap.End; !cur.After(end); cur = jr.cursor() {
			to := span(cur)
			first := ahead.take(cur, to)
			if next := to.Add(time.Hour); !next.After(end) {
				ahead.start(ctx, next, span(next))
			}
			err := client.walk(ctx, cur, to, first, func(a, b time.Time, ar *Archive) error {
				return s.loadRange(ctx, jr, l, ar, hoursIn(a, b))
			})
			if err != nil {
				l.prof.discard()
				if errors.Is(err, errTooManyEvents) {
					return fmt.Errorf("the range holds %d events or more, over the migration service's limit (spec §4.5); the hours done stay imported, and migrating the rest in smaller ranges adds no duplicates", s.cfg.MaxEvents)
				}
				return fmt.Errorf("hours %s to %s: %w", cur.Format(hourLayout), to.Format(hourLayout), err)
			}
		}
		jr.mu.Lock()
		jr.job.State = Loading
		jr.job.ProfilesUpdated, jr.job.ProfilesFailed = 0, 0 // a resumed load starts over
		snap = jr.job.clone()
		jr.mu.Unlock()
		if err := s.cfg.Jobs.Save(ctx, &snap); err != nil {
			return err
		}
	}
	return s.loadProfiles(ctx, jr, dir, snap.Profiles.Runs, project.ID)
}

func (jr *jobRun) cursor() time.Time {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	return jr.job.cursor()
}

// loadRange writes one fetched range and checkpoints it.
func (s *Service) loadRange(ctx context.Context, jr *jobRun, l *loader, ar *Archive, hours int) error {
	jr.mu.Lock()
	l.before = jr.job.EventsExported
	jr.mu.Unlock()
	err := l.load(ctx, ar.Lines)
	var obsolete []string
	if err == nil {
		obsolete, err = l.prof.commit(l.pst)
	}
	if err != nil {
		return err
	}
	c := l.take()
	s.countEvents(l.project, c)
	jr.mu.Lock()
	j := jr.job
	j.HoursDone += hours
	j.Counts.add(c)
	j.Profiles = profileState{Runs: append([]profileRun(nil), l.pst.Runs...), Seq: l.pst.Seq}
	j.UpdatedAt = s.cfg.Now().UTC()
	jr.live = Counts{}
	snap := j.clone()
	jr.mu.Unlock()
	if err := s.cfg.Jobs.Save(ctx, &snap); err != nil {
		return err
	}
	for _, f := range obsolete { // only now does no saved state name them
		_ = os.Remove(f)
	}
	return nil
}

// prefetcher holds at most one range exported ahead of its turn.
type prefetcher struct {
	client   *Client
	from, to time.Time
	ch       <-chan export
	cancel   context.CancelFunc
}

func (p *prefetcher) start(ctx context.Context, start, end time.Time) {
	p.stop()
	ctx, p.cancel = context.WithCancel(ctx)
	p.from, p.to, p.ch = start, end, p.client.prefetch(ctx, start, end)
}

// take returns the export of [start, end] if that is the range fetched
// ahead (waiting for it), else nil after discarding what was fetched.
func (p *prefetcher) take(start, end time.Time) *export {
	if p.ch == nil || !p.from.Equal(start) || !p.to.Equal(end) {
		p.stop()
		return nil
	}
	r := <-p.ch
	p.ch = nil
	p.cancel()
	return &r
}

// stop abandons the range fetched ahead, if any, and removes its archive.
func (p *prefetcher) stop() {
	if p.ch == nil {
		return
	}
	p.cancel()
	if r := <-p.ch; r.a != nil {
		r.a.Close()
	}
	p.ch = nil
}
