package amplitude

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/ratelimit"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// Projects finds target projects and authenticates status requests;
// *auth.Authenticator is one.
type Projects interface {
	ProjectByToken(token string) (*config.Project, bool)
	Project(id int64) (*config.Project, bool)
	Request(r *http.Request, allow auth.Allowed) (auth.Principal, error)
	RequestFor(r *http.Request, allow auth.Allowed, projectID int64) (auth.Principal, error)
}

// Writer is all a migration needs of a store: store.Store's Write.
type Writer interface {
	Write(ctx context.Context, batches []store.Batch) (store.WriteResult, error)
}

// Config is what the service takes from the server. Store, Jobs and
// Projects are required; the rest have defaults.
type Config struct {
	Store    Writer
	Jobs     JobStore
	Projects Projects
	Region   config.Region // this server's region
	Now      func() time.Time
	Logger   *slog.Logger
	Metrics  *metrics.Registry // nil: no metrics

	// HTTPClient talks to Amplitude; nil: one with a 30-minute timeout.
	HTTPClient *http.Client
	// BaseURL and EUBaseURL override Amplitude's hosts (tests, proxies).
	BaseURL, EUBaseURL string
	// TempDir holds downloads while they are read; "": os.TempDir().
	TempDir string
	// CredentialKey (32 bytes, see ParseKey) seals the Amplitude
	// credentials into the job file so an interrupted job resumes by
	// itself after a restart. Without it they are kept in memory only and
	// an interrupted job waits for the same request to be posted again.
	CredentialKey []byte

	MaxConcurrent int     // jobs running at once; default 1, the rest queue
	Backoff       Backoff // per export request
	// ChunkHours is the hours asked of Amplitude at once (split further on
	// 400 or persistent 429/5xx); default 24, aligned to UTC days.
	ChunkHours int
	BatchSize  int   // events per store write; default 5000
	MaxEvents  int64 // default MaxEvents (15 million)
	// EstimateSamples is how many hours are counted to estimate a range's
	// size before a job is accepted; default 12.
	EstimateSamples int
	// ProfileMemory bounds the memory of the per-user latest events before
	// they spill to disk; default 64 MB.
	ProfileMemory int
	// CalloutRate limits, per target project, the requests (a dry run, a
	// job's submission) that make the server call Amplitude; zero: 10 at
	// once, then one a minute (DefaultCalloutBurst, DefaultCalloutEvery).
	// The project token that is enough to ask is public, so without it
	// anyone could have the server call out at will.
	CalloutRate ratelimit.Rate
}

// The default CalloutRate, per process.
const (
	DefaultCalloutBurst = 10
	DefaultCalloutEvery = time.Minute
)

// Service runs Amplitude migrations. Use New, then Resume once at start,
// and Close at shutdown.
type Service struct {
	cfg    Config
	ctx    context.Context // jobs run under it; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}
	met    *serviceMetrics
	chunks *chunkPool // the loaders' batches, kept between jobs
	// callouts limits, per project, the requests that call Amplitude.
	callouts *ratelimit.Keyed[int64]

	mu   sync.Mutex
	jobs map[string]*jobRun // loaded this process: started, resumed or waiting
}

type serviceMetrics struct {
	events *metrics.CounterVec
	jobs   *metrics.CounterVec
}

// jobRun is a job known to this process.
type jobRun struct {
	mu      sync.Mutex
	job     *Job
	live    Counts // of the range in flight, not yet checkpointed
	creds   Credentials
	running bool
	done    chan struct{} // closed when the current run ends
}

// New checks cfg and returns an idle service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Jobs == nil || cfg.Projects == nil {
		return nil, errors.New("amplitude: Config needs Store, Jobs and Projects")
	}
	if cfg.CredentialKey != nil && len(cfg.CredentialKey) != KeySize {
		return nil, fmt.Errorf("amplitude: CredentialKey must be %d bytes, got %d", KeySize, len(cfg.CredentialKey))
	}
	if cfg.Region == "" {
		cfg.Region = config.RegionUS
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.EUBaseURL == "" {
		cfg.EUBaseURL = EUBaseURL
	}
	cfg.MaxConcurrent = defaultInt(cfg.MaxConcurrent, 1)
	cfg.ChunkHours = min(defaultInt(cfg.ChunkHours, 24), 24*MaxRangeDays)
	cfg.BatchSize = defaultInt(cfg.BatchSize, 5000)
	cfg.EstimateSamples = defaultInt(cfg.EstimateSamples, 12)
	cfg.ProfileMemory = defaultInt(cfg.ProfileMemory, 64<<20)
	if cfg.MaxEvents <= 0 {
		cfg.MaxEvents = MaxEvents
	}
	if cfg.CalloutRate == (ratelimit.Rate{}) {
		cfg.CalloutRate = ratelimit.Rate{Burst: DefaultCalloutBurst, Every: DefaultCalloutEvery}
	}
	s := &Service{cfg: cfg, slots: make(chan struct{}, cfg.MaxConcurrent), jobs: map[string]*jobRun{},
		chunks: newChunkPool(defaultKeepIdle), callouts: ratelimit.NewKeyed[int64](cfg.CalloutRate, cfg.Now, 0)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.Metrics != nil {
		s.met = &serviceMetrics{
			events: cfg.Metrics.Counter("tributary_migration_events_total",
				"Events of migrations, by source tool, target project and outcome (imported, duplicate, failed).", "source", "project", "outcome"),
			jobs: cfg.Metrics.Counter("tributary_migration_jobs_total", "Migration jobs that ended, by source tool and state.", "source", "state"),
		}
	}
	return s, nil
}

func defaultInt(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Close stops every running job at its next step and waits for them.
// Their records keep the last checkpoint, from which Resume continues.
func (s *Service) Close() error {
	s.cancel()
	s.wg.Wait()
	s.chunks.close()
	return nil
}

// Resume loads the jobs a previous process left unfinished and restarts
// those whose credentials it can unseal; the others wait for the request
// to be posted again (Status shows needs_credentials).
func (s *Service) Resume(ctx context.Context) error {
	jobs, err := s.cfg.Jobs.List(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.State.Final() {
			continue
		}
		jr := &jobRun{job: j}
		s.mu.Lock()
		if _, loaded := s.jobs[j.ID]; loaded {
			s.mu.Unlock()
			continue
		}
		s.jobs[j.ID] = jr
		s.mu.Unlock()
		resume := j.State == Loading // the profile pass does not call Amplitude
		if j.Sealed != "" && s.cfg.CredentialKey != nil {
			c, err := unseal(s.cfg.CredentialKey, j.ID, j.Sealed)
			if err == nil {
				jr.creds, resume = c, true
			} else {
				s.cfg.Logger.Warn("amplitude migration: cannot unseal its credentials (was the key changed?)", "job", j.ID)
			}
		}
		if resume {
			s.cfg.Logger.Info("amplitude migration resuming", "job", j.ID, "project", j.ProjectID, "hours_done", j.HoursDone, "hours_total", j.HoursTotal)
			s.launch(jr)
			continue
		}
		jr.mu.Lock()
		j.NeedsCredentials = true
		snap := j.clone()
		jr.mu.Unlock()
		if err := s.cfg.Jobs.Save(ctx, &snap); err != nil {
			return err
		}
		s.cfg.Logger.Warn("amplitude migration interrupted; post the same request again to resume it", "job", j.ID, "project", j.ProjectID)
	}
	return nil
}

// Status reports a job by id: one of this process, or from the job store.
func (s *Service) Status(ctx context.Context, id string) (Status, error) {
	s.mu.Lock()
	jr, ok := s.jobs[id]
	s.mu.Unlock()
	if ok {
		return jr.status(s.cfg.Now()), nil
	}
	j, err := s.cfg.Jobs.Load(ctx, id)
	if err != nil {
		return Status{}, err
	}
	return j.status(s.cfg.Now()), nil
}

func (jr *jobRun) status(now time.Time) Status {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	st := jr.job.status(now)
	live := jr.live
	live.Failures = nil // shown once checkpointed, so a restart does not repeat them
	st.Counts.add(live)
	return st
}

// Wait blocks until the job's current run ends (or ctx does) and returns
// its status. A job waiting for credentials returns at once.
func (s *Service) Wait(ctx context.Context, id string) (Status, error) {
	s.mu.Lock()
	jr, ok := s.jobs[id]
	s.mu.Unlock()
	if ok {
		jr.mu.Lock()
		done := jr.done
		jr.mu.Unlock()
		if done != nil {
			select {
			case <-done:
			case <-ctx.Done():
				return Status{}, ctx.Err()
			}
		}
	}
	return s.Status(ctx, id)
}

// Submit checks a request as POST /amplitude does (a *RequestError says
// why it was refused), estimates its size, and starts a job, or resumes
// an unfinished one for the same project, range and Amplitude key. It
// does not wait for the job; a dry run is DryRun.
func (s *Service) Submit(ctx context.Context, req Request) (Status, error) {
	t, err := s.check(req)
	if err != nil {
		return Status{}, err
	}
	if err := s.allowCallout(t.project.ID); err != nil {
		return Status{}, err
	}
	if err := s.checkSize(ctx, t); err != nil {
		return Status{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// An interrupted job of an earlier process (a CLI run, a server
	// without a credential key) that this one has not loaded is resumed
	// like one waiting in memory.
	stored, err := s.cfg.Jobs.List(ctx)
	if err != nil {
		return Status{}, err
	}
	for _, j := range stored {
		if _, loaded := s.jobs[j.ID]; !loaded && !j.State.Final() {
			s.jobs[j.ID] = &jobRun{job: j}
		}
	}
	asked := askedRange{Start: req.StartDate, End: req.EndDate}
	for _, jr := range s.jobs {
		jr.mu.Lock()
		j := jr.job
		sameRange := j.Start.Equal(t.start) && j.End.Equal(t.end) || j.Asked != nil && *j.Asked == asked
		same := !j.State.Final() && j.ProjectID == t.project.ID && sameRange &&
			j.Region == t.region && j.KeyFingerprint == req.Credentials.fingerprint(j.ID)
		if !same {
			jr.mu.Unlock()
			continue
		}
		if jr.running {
			jr.mu.Unlock()
			return jr.status(s.cfg.Now()), nil
		}
		// Interrupted and waiting for its credentials: resume it.
		jr.creds = req.Credentials
		j.NeedsCredentials = false
		j.Sealed = s.sealFor(j.ID, req.Credentials)
		snap := j.clone()
		jr.mu.Unlock()
		if err := s.cfg.Jobs.Save(ctx, &snap); err != nil {
			return Status{}, err
		}
		s.launch(jr)
		return jr.status(s.cfg.Now()), nil
	}
	now := s.cfg.Now().UTC()
	id, err := newJobID()
	if err != nil {
		return Status{}, err
	}
	j := &Job{
		ID: id, ProjectID: t.project.ID, Start: t.start, End: t.end, Region: t.region, State: Queued,
		HoursTotal: hoursIn(t.start, t.end), CreatedAt: now, UpdatedAt: now,
		KeyFingerprint: req.Credentials.fingerprint(id), Sealed: s.sealFor(id, req.Credentials), Asked: &asked,
	}
	if err := s.cfg.Jobs.Save(ctx, j); err != nil {
		return Status{}, err
	}
	jr := &jobRun{job: j, creds: req.Credentials}
	s.jobs[id] = jr
	s.cfg.Logger.Info("amplitude migration accepted", "job", id, "project", j.ProjectID,
		"start", j.Start.Format(hourLayout), "end", j.End.Format(hourLayout), "region", j.Region)
	s.launch(jr)
	return jr.status(s.cfg.Now()), nil
}

// sealFor seals credentials when the server has a key, else "".
func (s *Service) sealFor(id string, c Credentials) string {
	if s.cfg.CredentialKey == nil {
		return ""
	}
	sealed, err := seal(s.cfg.CredentialKey, id, c)
	if err != nil { // only a broken random source: fall back to memory
		s.cfg.Logger.Warn("amplitude migration: credentials kept in memory only", "job", id, "err", err)
		return ""
	}
	return sealed
}

func newJobID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("amplitude: job id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// target is a checked request.
type target struct {
	project    *config.Project
	start, end time.Time
	region     string // US or EU
	baseURL    string
	creds      Credentials
}

// check applies every refusal that needs no network.
func (s *Service) check(req Request) (target, error) {
	t := target{creds: req.Credentials}
	var missing []string
	for _, f := range [...]struct{ name, v string }{
		{"SOURCE_API_KEY", req.Credentials.APIKey}, {"SOURCE_API_SECRET", req.Credentials.APISecret}, {"TARGET_TOKEN", req.Token},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return t, refuse(http.StatusBadRequest, "missing or empty required field: %s", strings.Join(missing, ", "))
	}
	var err error
	if t.start, t.end, err = req.Hours(s.cfg.Now()); err != nil {
		return t, err
	}
	if t.region, err = req.amplitudeRegion(); err != nil {
		return t, err
	}
	p, ok := s.cfg.Projects.ProjectByToken(req.Token)
	if !ok {
		return t, refuse(http.StatusUnauthorized, "TARGET_TOKEN is not the token of any project on this server")
	}
	t.project = p
	if p.Region != s.cfg.Region {
		return t, refuse(http.StatusForbidden, "project %d is enrolled in %s data residency; send the migration to that region's server (this server is %s)",
			p.ID, regionName(p.Region), regionName(s.cfg.Region))
	}
	if (t.region == "EU") != (p.Region == config.RegionEU) {
		if t.region == "EU" {
			return t, refuse(http.StatusBadRequest, "REGION is EU but project %d is enrolled in %s data residency", p.ID, regionName(p.Region))
		}
		return t, refuse(http.StatusBadRequest, "project %d is enrolled in EU data residency: pass \"REGION\": \"EU\" (Amplitude's EU export host is used then)", p.ID)
	}
	if p.IDManagement == config.IDOriginal {
		return t, refuse(http.StatusBadRequest, "project %d uses Original ID Merge; migrated Amplitude data needs a project with Simplified ID Merge (id_management: simplified), set before any data is sent", p.ID)
	}
	t.baseURL = s.cfg.BaseURL
	if t.region == "EU" {
		t.baseURL = s.cfg.EUBaseURL
	}
	return t, nil
}

// allowCallout charges a request that is about to call Amplitude to its
// project's CalloutRate; only requests that passed every local check
// count.
func (s *Service) allowCallout(project int64) error {
	if ok, wait := s.callouts.Allow(project); !ok {
		e := refuse(http.StatusTooManyRequests, "too many migration requests for project %d (%d at once, then one every %s); retry later",
			project, s.cfg.CalloutRate.Burst, s.cfg.CalloutRate.Every)
		e.RetryAfter = wait
		return e
	}
	return nil
}

func regionName(r config.Region) string {
	switch r {
	case config.RegionEU:
		return "EU"
	case config.RegionIN:
		return "India"
	}
	return "US"
}

func (s *Service) client(baseURL string, c Credentials) *Client {
	return &Client{BaseURL: baseURL, HTTP: s.cfg.HTTPClient, Credentials: c, Backoff: s.cfg.Backoff, TempDir: s.cfg.TempDir, Log: s.cfg.Logger}
}

// launch runs the job in the background under the service's context.
func (s *Service) launch(jr *jobRun) {
	jr.mu.Lock()
	jr.running = true
	jr.done = make(chan struct{})
	done := jr.done
	jr.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		defer func() {
			jr.mu.Lock()
			jr.running = false
			jr.live = Counts{}
			jr.mu.Unlock()
		}()
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		defer func() { <-s.slots }()
		err := s.execute(s.ctx, jr)
		if err != nil && s.ctx.Err() != nil {
			s.cfg.Logger.Info("amplitude migration stopped by shutdown; it resumes at its last checkpoint", "job", jr.job.ID)
			return
		}
		s.finish(jr, err)
	}()
}

// finish records a job's end.
func (s *Service) finish(jr *jobRun, err error) {
	jr.mu.Lock()
	j := jr.job
	now := s.cfg.Now().UTC()
	j.State, j.FinishedAt, j.UpdatedAt, j.Sealed = Succeeded, now, now, ""
	if err != nil {
		j.State, j.Error = Failed, scrubURLs(err.Error()) // clients read it; the log below keeps all
	}
	j.Counts.add(jr.live)
	jr.live = Counts{}
	snap := j.clone()
	jr.mu.Unlock()
	if serr := s.cfg.Jobs.Save(context.Background(), &snap); serr != nil {
		s.cfg.Logger.Error("amplitude migration: saving the final state", "job", snap.ID, "err", serr)
	} else {
		// Final jobs are read from the job store; the map holds live ones.
		s.mu.Lock()
		delete(s.jobs, snap.ID)
		s.mu.Unlock()
	}
	if dir, derr := s.cfg.Jobs.WorkDir(snap.ID); derr == nil {
		_ = os.RemoveAll(dir)
	}
	if s.met != nil {
		s.met.jobs.Add(1, Source, string(snap.State))
	}
	log := s.cfg.Logger.With("job", snap.ID, "project", snap.ProjectID, "hours", snap.HoursDone,
		"exported", snap.EventsExported, "imported", snap.EventsImported, "duplicates", snap.EventsDuplicate,
		"failed", snap.EventsFailed, "profiles", snap.ProfilesUpdated)
	if err != nil {
		log.Error("amplitude migration failed", "err", err)
		return
	}
	log.Info("amplitude migration succeeded", "duration", snap.FinishedAt.Sub(snap.StartedAt))
}

func (s *Service) countEvents(project int64, c Counts) {
	if s.met == nil {
		return
	}
	p := strconv.FormatInt(project, 10)
	s.met.events.Add(c.EventsImported-c.EventsDuplicate, Source, p, "imported")
	s.met.events.Add(c.EventsDuplicate, Source, p, "duplicate")
	s.met.events.Add(c.EventsFailed, Source, p, "failed")
}
