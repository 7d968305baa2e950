// Package server assembles a running Tributary process from its config:
// store, group committer, authenticator, HTTP API, and graceful shutdown.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/commit"
	"github.com/tributary-dev/tributary/ingest/ratelimit"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/ingest/store/pgstore"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/scheduler/appapi"
)

// ShutdownGrace bounds how long in-flight requests may take after SIGTERM.
const ShutdownGrace = 30 * time.Second

// Run serves until ctx is cancelled, then shuts down gracefully: stop
// accepting, finish in-flight requests (their commits included), close the
// store. ready, when not nil, receives the bound address once listening.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, ready func(addr string)) error {
	imports, err := loadImports(cfg)
	if err != nil {
		return err
	}
	// Unset memory_limit still bounds the process (config.DefaultMemoryBudget):
	// DuckDB's own default would let its cache grow to 80 % of RAM.
	total, from := cfg.EffectiveMemoryBudget()
	if from != "memory_limit" {
		log.Info("memory_limit unset: using the default budget", "budget_mib", total>>20, "from", from)
	}
	budget := NewMemoryBudget(total)
	defer LimitGoHeap(budget, log)()
	st, err := openStore(ctx, cfg, log, budget)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing store", "err", err)
		}
	}()
	reg := metrics.New()
	reg.AddRuntime() // go_* and process_*: the metrics_token's scrape only
	ist := instrumented(st, reg)
	committer := commit.New(ist, commit.Options{})
	reg.Gauge("tributary_commit_queue_requests", "Requests waiting for the next group-commit write.",
		func() float64 { n, _ := committer.Queued(); return float64(n) })
	reg.Gauge("tributary_commit_queue_records", "Records waiting for the next group-commit write.",
		func() float64 { _, n := committer.Queued(); return float64(n) })
	a := auth.New(cfg, time.Now)
	// Processes on one Postgres database share OAuth tokens and rate
	// budgets through it. The embedded store has a single process, whose
	// memory is enough and costs no store round trip.
	var limiter *ratelimit.Limiter
	if cfg.StoreKind() == config.StorePostgres {
		a.ShareTokens(st, log)
		limiter = ratelimit.NewShared(time.Now, st, log)
	}
	mig, err := openMigrations(ctx, cfg, ist, a, reg, log)
	if err != nil {
		return err
	}
	defer mig.Close() // before the store closes: jobs stop at a checkpoint
	sched, err := NewScheduler(ctx, cfg, imports, st, log, reg)
	if err != nil {
		return err
	}
	forgetRemovedMirrors(ctx, sched.Catalog(), st, cfg.StoreKind() == config.StorePostgres, log)
	apiSrv := api.New(api.Deps{Config: cfg, Store: st, Committer: committer, Auth: a, Metrics: reg, Logger: log, Limiter: limiter})
	appSrv := appapi.New(appapi.Deps{Auth: apiSrv, Scheduler: sched, Store: st, Logger: log})

	// Runs stop before the store closes (defers run last-in first-out):
	// each commits its batch in flight and is marked CANCELLED. Start
	// comes before listening, so the history a client reads already shows
	// the runs a crash interrupted as FAILED.
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		defer cancel()
		if err := sched.Stop(sctx); err != nil {
			log.Error("stopping sync runs", "err", err)
		}
	}()
	if err := sched.Start(ctx); err != nil {
		_ = committer.Close()
		return err
	}
	// Alert delivery stops before the runs do (last-in first-out): the
	// alerts of runs ending at shutdown wait in the outbox for the next start.
	defer startAlerts(cfg, st, sched, reg, log)()
	defer startLedgerPrune(cfg, st, log)()
	registerSyncMetrics(reg, st, sched.Catalog())
	limits := cfg.Edges()
	if limits.MaxConnections == 0 {
		limits.MaxConnections = defaultMaxConnections()
	}
	edge := newEdge(limits.MaxConnections, reg, log)
	hs := &http.Server{
		Handler:           apiSrv.Handler(appSrv.Routes),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         edge.connState,
	}
	scheme := "http"
	if cfg.TLS() {
		certs, err := newCertReloader(cfg.TLSCertFile, cfg.TLSKeyFile, certCheckEvery, time.Now, log)
		if err != nil {
			_ = committer.Close()
			return fmt.Errorf("config %s: %w", cfg.File(), err)
		}
		hs.TLSConfig, scheme = tlsConfig(certs), "https"
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = committer.Close()
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ln = edge.listener(ln)
	log.Info("tributary listening", "addr", ln.Addr().String(), "scheme", scheme, "region", cfg.Region, "store", cfg.StoreRedacted(),
		"data_dir", cfg.DataDir, "projects", len(cfg.Projects), "sync_owner", sched.Owner(), "max_connections", limits.MaxConnections)
	errc := make(chan error, 3)
	if cfg.RedirectHTTPListen != "" {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		rs, raddr, err := serveRedirect(cfg.RedirectHTTPListen, port, log, errc)
		if err != nil {
			_ = ln.Close()
			_ = committer.Close()
			return err
		}
		defer rs.Close()
		log.Info("redirecting plain HTTP to https", "addr", raddr.String())
	}
	if ready != nil {
		ready(ln.Addr().String())
	}
	hs.Handler = withConsole(hs.Handler, cfg, a, log) // before any listener serves: it installs the session check
	if cfg.MigrateListen == "" {
		hs.Handler = withMigrations(hs.Handler, mig.Handler())
	} else {
		mln, err := net.Listen("tcp", cfg.MigrateListen)
		if err != nil {
			_ = committer.Close()
			return fmt.Errorf("listen %s (migrate_listen): %w", cfg.MigrateListen, err)
		}
		// With TLS on, the migration service speaks HTTPS too: its requests
		// carry the source's API secret. A clone, because serving HTTP/2
		// writes to the server's TLS config.
		ms := &http.Server{Handler: paceBodies(mig.Handler(), limits.BodyMinRate, bodyGrace), ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout: hs.IdleTimeout, ErrorLog: hs.ErrorLog, ConnState: edge.connState, TLSConfig: hs.TLSConfig.Clone()}
		mln = edge.listener(mln)
		defer ms.Close()
		go func() {
			var err error
			if ms.TLSConfig != nil {
				err = ms.ServeTLS(mln, "", "")
			} else {
				err = ms.Serve(mln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("migrate listener: %w", err)
			}
		}()
		log.Info("migration service listening", "addr", mln.Addr().String(), "scheme", scheme)
	}
	hs.Handler = paceBodies(limitTokenEndpoints(hs.Handler, limits.IPRequestsPerSecond, time.Now, reg), limits.BodyMinRate, bodyGrace)
	go func() {
		if hs.TLSConfig != nil {
			errc <- hs.ServeTLS(ln, "", "") // the certificate comes from TLSConfig.GetCertificate
			return
		}
		errc <- hs.Serve(ln)
	}()
	select {
	case err := <-errc:
		_ = committer.Close()
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Error("graceful shutdown incomplete", "err", err)
	}
	if err := committer.Close(); err != nil {
		log.Error("closing committer", "err", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger, b MemoryBudget) (store.Store, error) {
	// DuckDB only loads the write log in the background; one thread leaves
	// the other core to the requests (measured: +6% throughput, p99 1.4 s → 1.1 s at saturation).
	return OpenStore(ctx, cfg, log, 1, b)
}

// OpenStore opens the configured store for a process: the server, or a
// CLI command that works on the data directory itself. The embedded
// store gets b's DuckDB share of memory_limit; the process applies the Go
// share with LimitGoHeap. threads caps
// DuckDB's threads (0: one per core); the Postgres store ignores it (its
// pool size comes from the URL's pool_max_conns).
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger, threads int, b MemoryBudget) (store.Store, error) {
	var st store.Store
	if cfg.StoreKind() == config.StorePostgres {
		pg, err := pgstore.Open(ctx, cfg.Store, pgstore.Options{Logger: log})
		if err != nil {
			// Never the URL itself: it may hold the password.
			return nil, fmt.Errorf("open postgres store %s: %w", cfg.StoreRedacted(), err)
		}
		st = pg
	} else {
		path := filepath.Join(cfg.DataDir, "tributary.duckdb")
		if cfg.DedupKeys != "" {
			log.Warn("dedup_keys is deprecated and ignored: the embedded store always keeps recent dedup keys in memory and older ones on disk", "dedup_keys", cfg.DedupKeys)
		}
		duck, err := duckstore.Open(ctx, path, duckstore.Options{MemoryLimit: b.duckDBLimit(), Threads: threads,
			LoadChunkBytes: b.LoadChunkBytes, LoadTxnRows: b.LoadTxnRows,
			RowGroupRows: b.RowGroupRows, ReturnFreedMemory: b.ReturnFreed, LoaderLagBytes: b.LoaderLag, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open embedded store %s: %w", path, err)
		}
		st = duck
	}
	// A project's ID management mode is fixed once it holds data: a config
	// edit that changes it must stop the server, not re-read old clusters
	// under new rules.
	for i := range cfg.Projects {
		if err := st.SetMode(ctx, cfg.Projects[i].ID, cfg.Projects[i].IDMode()); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("config %s: projects[%d].id_management: %w", cfg.File(), i, err)
		}
	}
	return st, nil
}
