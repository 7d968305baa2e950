package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/commit"
	"github.com/tributary-dev/tributary/ingest/enrich"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/ratelimit"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// Deps are what the API needs from the rest of the server.
type Deps struct {
	Config    *config.Config
	Store     store.Store
	Committer *commit.Committer
	Auth      *auth.Authenticator
	Metrics   *metrics.Registry
	Logger    *slog.Logger
	Now       func() time.Time // nil: time.Now
	// Limiter charges the per-project rate limits; nil: one of this
	// process alone (ratelimit.New), which an embedded store needs.
	Limiter *ratelimit.Limiter
}

// Server holds the handlers' shared state.
type Server struct {
	cfg       *config.Config
	store     store.Store
	committer *commit.Committer
	auth      *auth.Authenticator
	limiter   *ratelimit.Limiter
	log       *slog.Logger
	now       func() time.Time
	limits    record.Limits
	met       serverMetrics
	// enrich caches lookup tables for reads; the lookup upload handler
	// invalidates a table after replacing it.
	enrich *enrich.Enricher
	// corsPolicy: which origins the token endpoints answer (cors.go).
	corsPolicy corsPolicy
	// lookupGate bounds the memory of lookup uploads in flight (lookup.go).
	lookupGate *lookup.Gate
	// historyGate: one query reading History versions at a time (history.go).
	historyGate chan struct{}

	bufs     sync.Pool // *bytes.Buffer request bodies
	decoders sync.Pool // *decodeState
}

type decodeState struct {
	d     record.Decoder
	recs  [][]byte
	batch store.Batch
}

type serverMetrics struct {
	reg        *metrics.Registry
	requests   *metrics.CounterVec
	accepted   *metrics.CounterVec
	rejected   *metrics.CounterVec
	commitWait *metrics.Histogram
	exported   *metrics.CounterVec
	// trackTooOld counts /track events dropped for being older than 5 days:
	// the client is told 1, so this is the only trace of them.
	trackTooOld *metrics.CounterVec
}

// New builds the API server.
func New(d Deps) *Server {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = metrics.New()
	}
	if d.Limiter == nil {
		d.Limiter = ratelimit.New(d.Now)
	}
	s := &Server{
		cfg: d.Config, store: d.Store, committer: d.Committer, auth: d.Auth,
		limiter: d.Limiter, log: d.Logger, now: d.Now, limits: record.DefaultLimits(),
		lookupGate: newLookupGate(d.Config), historyGate: make(chan struct{}, 1),
	}
	s.enrich = enrich.New(d.Store, d.Logger)
	s.corsPolicy = newCORSPolicy(d.Config.Projects)
	s.bufs.New = func() any { return new(bytes.Buffer) }
	s.decoders.New = func() any { return new(decodeState) }
	reg := d.Metrics
	s.met = serverMetrics{
		reg:        reg,
		requests:   reg.Counter("tributary_http_requests_total", "HTTP requests by route and status.", "route", "code"),
		accepted:   reg.Counter("tributary_records_accepted_total", "Records accepted and durably stored (duplicates included).", "project"),
		rejected:   reg.Counter("tributary_records_rejected_total", "Records or requests refused, by reason (failed field, too_large, rate_limited, malformed).", "project", "reason"),
		commitWait: reg.Histogram("tributary_commit_seconds", "Time from handing a batch to the group committer until it is durable.", 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
		exported:   reg.Counter("tributary_events_exported_total", "Events written by raw export.", "project"),
		trackTooOld: reg.Counter("tributary_track_events_too_old_total",
			"Events /track accepted but dropped because they are older than 5 days (use /import for history).", "project"),
	}
	s.registerUsageMetrics(reg)
	return s
}

// Handler returns the routed, instrumented handler. Each mount adds the
// routes of a layer above (the app API's imports, scheduler/appapi) to the
// same mux, so they share the request metric and the catch-all 404.
func (s *Server) Handler(mounts ...func(RouteFunc)) http.Handler {
	mux := http.NewServeMux()
	route := func(pattern, name string, h http.HandlerFunc) {
		mux.Handle(pattern, s.instrument(name, h))
	}
	// The ingestion endpoints answer with and without a trailing slash:
	// mixpanel-browser's default routes are track/, engage/ and groups/.
	ingest := func(path, name string, h http.HandlerFunc) {
		route(path, name, h)
		route(path+"/{$}", name, h)
	}
	ingest("/import", "import", s.handleImport)
	// Token-authenticated endpoints that browser SDKs call cross-origin.
	ingest("/track", "track", s.cors(s.handleTrack))
	ingest("/engage", "engage", s.cors(s.handleProfiles(profile.User)))
	ingest("/groups", "groups", s.cors(s.handleProfiles(profile.Group)))
	route("/api/2.0/export", "export", s.handleExport)
	s.queryRoutes(route)
	for _, mount := range mounts {
		mount(route)
	}
	route("GET "+usagePath, "app_usage", s.handleUsage)
	route("GET "+dailyUsagePath, "app_usage_daily", s.handleDailyUsage)
	route("/lookup-tables", "lookup_tables", s.handleLookupList)
	route("/lookup-tables/{id}", "lookup_table", s.handleLookupPut)
	route("/oauth/token", "oauth_token", s.auth.ServeToken)
	route("/healthz", "healthz", s.handleHealth)
	route("/metrics", "metrics", s.handleMetrics)
	route("/", "not_found", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) instrument(route string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		h(rec, r)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		s.met.requests.Add(1, route, strconv.Itoa(rec.code))
	})
}

// authorize authenticates, checks the role for writes and the project's
// data residency. On failure it has already answered.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, allow auth.Allowed, write bool) (auth.Principal, bool) {
	if write && crossSiteBrowser(r) {
		writeError(w, http.StatusForbidden, crossSiteWriteMsg)
		return auth.Principal{}, false
	}
	p, err := s.auth.Request(r, allow)
	if err != nil {
		msg := err.Error()
		switch {
		case errors.Is(err, auth.ErrUnavailable):
			// The cause is the store's (logged); the client only learns to retry.
			s.log.Warn("authentication unavailable", "err", err)
			writeError(w, http.StatusServiceUnavailable, "credentials cannot be checked now; retry")
		case errors.Is(err, auth.ErrUnauthorized):
			writeError(w, http.StatusUnauthorized, msg)
		default:
			writeError(w, http.StatusForbidden, msg)
		}
		return p, false
	}
	if write && !p.CanWrite() {
		writeError(w, http.StatusForbidden, fmt.Sprintf("service account %q has role %s in project %d; writing needs owner or admin", p.Account, p.Role, p.Project.ID))
		return p, false
	}
	if p.Project.Region != s.cfg.Region {
		writeError(w, http.StatusForbidden, residencyMessage(p.Project, s.cfg.Region))
		return p, false
	}
	return p, true
}

// metricsScope authenticates a scrape: the metrics_token sees every
// series (all is true); a project's API secret or an owner or admin
// service account sees that project's (project). ok is false otherwise.
func (s *Server) metricsScope(r *http.Request) (project string, all, ok bool) {
	if scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "bearer") {
		if s.cfg.MetricsToken == "" {
			return "", false, false
		}
		got, want := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(s.cfg.MetricsToken))
		ok := subtle.ConstantTimeCompare(got[:], want[:]) == 1
		return "", ok, ok
	}
	p, err := s.auth.Request(r, auth.Allowed{Secret: true, ServiceAccount: true})
	if err != nil || !p.CanWrite() {
		return "", false, false
	}
	return strconv.FormatInt(p.Project.ID, 10), false, true
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

// handleHealth pings the store: with several processes on one Postgres
// database, a load balancer takes a process whose store does not answer
// out of rotation. The answer names the store kind (never its URL) and
// how long the ping took.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := s.store.Ping(ctx)
	body := map[string]any{"status": "ok", "store": "ok", "store_kind": s.cfg.StoreKind(),
		"store_ping_ms": float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		body["status"], body["store"] = "unhealthy", err.Error()
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// handleMetrics serves the metrics: every series to the scrape token
// (metrics_token, as a Bearer token); to the credentials of someone who
// may administer a project (its API secret, or an owner/admin service
// account) only the series labelled with that project, since the rest
// would describe the other projects' traffic (metrics.ProjectHandler).
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	project, all, ok := s.metricsScope(r)
	if !ok {
		writeError(w, http.StatusUnauthorized, "/metrics needs the metrics_token as a Bearer token, or a project's API secret or an owner or admin service account (Basic auth)")
		return
	}
	// The library's handler: the text format, or OpenMetrics or protobuf
	// when the scraper asks, gzipped when it accepts that.
	if all {
		s.met.reg.Handler(s.log).ServeHTTP(w, r)
		return
	}
	s.met.reg.ProjectHandler(project, s.log).ServeHTTP(w, r)
}
