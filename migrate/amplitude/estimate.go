package amplitude

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// checkSize refuses a range of MaxEvents events or more before a job
// starts. Amplitude's Export API has no count, so the size is estimated by
// exporting a sample of single hours, spread evenly over the range (the
// middle hour of each of EstimateSamples equal strata), and scaling their
// total by hours/samples; a range no longer than the sample is counted
// exactly. Sampling whole hours keeps the estimate to the one API the job
// uses anyway, and checks the credentials before a job is accepted. It can
// miss a burst between samples, so the job itself stops with a failure when
// its exported events reach MaxEvents.
func (s *Service) checkSize(ctx context.Context, t target) error {
	est, sampled, err := s.estimate(ctx, t)
	if err != nil {
		return err
	}
	if est >= s.cfg.MaxEvents {
		how := "counted"
		if sampled > 0 {
			how = fmt.Sprintf("estimated from %d sampled hours", sampled)
		}
		return refuse(http.StatusRequestEntityTooLarge,
			"the range holds about %d events (%s); the migration service takes fewer than %d: migrate it in smaller ranges",
			est, how, s.cfg.MaxEvents)
	}
	return nil
}

// estimate returns the estimated events of t's range and how many hours
// were sampled (0: the whole range was counted).
func (s *Service) estimate(ctx context.Context, t target) (int64, int, error) {
	c := s.client(t.baseURL, t.creds)
	hours := hoursIn(t.start, t.end)
	n := s.cfg.EstimateSamples
	var total int64
	count := func(_, _ time.Time, a *Archive) error {
		return a.Lines(func(Location, []byte) error { total++; return nil })
	}
	if hours <= n {
		return total, 0, exportError(c.Walk(ctx, t.start, t.end, count))
	}
	for i := range n {
		h := t.start.Add(time.Duration((2*i+1)*hours/(2*n)) * time.Hour)
		a, err := c.Export(ctx, h, h)
		switch {
		case errors.Is(err, ErrNoData):
			continue
		case errors.Is(err, ErrTooLarge): // one hour over 4 GB is millions of events
			return s.cfg.MaxEvents, i + 1, nil
		case err != nil:
			return 0, 0, exportError(err)
		}
		err = count(h, h, a)
		a.Close()
		if err != nil {
			return 0, 0, exportError(err)
		}
	}
	return total * int64(hours) / int64(n), n, nil
}

// exportError turns an export failure into the refusal a client sees.
func exportError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, ErrUnauthorized):
		return refuse(http.StatusUnauthorized, "Amplitude refused SOURCE_API_KEY / SOURCE_API_SECRET: check the project's API key and secret key")
	case errors.Is(err, errTooManyEvents):
		return err
	}
	return refuse(http.StatusBadGateway, "Amplitude's Export API failed: %s", scrubURLs(err.Error()))
}

// DryRunResult is what a dry run found.
type DryRunResult struct {
	DryRun     bool   `json:"dry_run"`
	ProjectID  int64  `json:"project_id"`
	StartDate  string `json:"start"` // first hour, YYYY-MM-DDTHH
	EndDate    string `json:"end"`   // last hour, inclusive
	Region     string `json:"region"`
	HoursTotal int    `json:"hours_total"`
	HoursDone  int    `json:"hours_done"`
	// Events would be migrated: exported and valid under /import's rules.
	Events int64 `json:"events"`
	// DistinctUsers is how many user ids those events carry: the user
	// profiles the migration would write.
	DistinctUsers  int64     `json:"distinct_users"`
	EventsExported int64     `json:"events_exported"`
	EventsFailed   int64     `json:"events_failed"`
	Failures       []Failure `json:"failures,omitempty"`
}

// DryRun counts what a migration of req would do, writing nothing: every
// hour is exported, transformed and validated like a real job. It stops
// with a 413 RequestError at MaxEvents. progress, if set, is called after
// each fetched range.
func (s *Service) DryRun(ctx context.Context, req Request, progress func(DryRunResult)) (DryRunResult, error) {
	t, err := s.check(req)
	if err != nil {
		return DryRunResult{}, err
	}
	if err := s.allowCallout(t.project.ID); err != nil {
		return DryRunResult{}, err
	}
	r := DryRunResult{
		DryRun: true, ProjectID: t.project.ID, Region: t.region, HoursTotal: hoursIn(t.start, t.end),
		StartDate: t.start.Format(statusLayout), EndDate: t.end.Format(statusLayout),
	}
	l := newLoader(s.chunks, t.project.ID, t.project.Token, nil, s.cfg.Now, s.cfg.BatchSize)
	l.maxEvents = s.cfg.MaxEvents
	var c Counts
	err = s.client(t.baseURL, t.creds).Walk(ctx, t.start, t.end, func(a, b time.Time, ar *Archive) error {
		l.before = c.EventsExported
		if err := l.load(ctx, ar.Lines); err != nil {
			return err
		}
		c.add(l.take())
		r.HoursDone += hoursIn(a, b)
		r.Events, r.EventsExported, r.EventsFailed = c.EventsImported, c.EventsExported, c.EventsFailed
		r.DistinctUsers = int64(len(l.users))
		if progress != nil {
			progress(r)
		}
		return nil
	})
	if errors.Is(err, errTooManyEvents) {
		return r, refuse(http.StatusRequestEntityTooLarge, "the range holds %d events or more; the migration service takes fewer: migrate it in smaller ranges", s.cfg.MaxEvents)
	}
	if err != nil {
		return r, exportError(err)
	}
	r.Failures = c.Failures
	return r, nil
}
