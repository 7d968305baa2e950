package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/scheduler"
	"github.com/tributary-dev/tributary/scheduler/alerts"
)

// FreshnessEvery is how often the freshness rule looks at the imports.
const FreshnessEvery = time.Minute

func hasAlerts(cfg *config.Config) bool {
	for _, p := range cfg.Projects {
		if p.Alerts != nil {
			return true
		}
	}
	return false
}

// newMonitor is the alert rules over the config's projects (nil: no
// project has alerts).
func newMonitor(cfg *config.Config, st store.Store, cat *scheduler.Catalog, log *slog.Logger) scheduler.Monitor {
	if !hasAlerts(cfg) {
		return nil
	}
	return alerts.NewMonitor(alerts.MonitorOptions{Store: st, Pauser: cat, Projects: cfg.Projects, Log: log})
}

// startAlerts runs the alert deliverer and the freshness checks until
// the returned stop is called (after the scheduler stopped, so that the
// alerts of the last runs are in the outbox; what is left there goes at
// the next start).
func startAlerts(cfg *config.Config, st store.Store, sched *scheduler.Scheduler, reg *metrics.Registry, log *slog.Logger) (stop func()) {
	if !hasAlerts(cfg) {
		return func() {}
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := fmt.Sprintf("%s/%d/%s/alerts", host, os.Getpid(), hex.EncodeToString(b[:]))
	del := alerts.NewDeliverer(alerts.DelivererOptions{Outbox: st, Projects: cfg.Projects, Owner: owner, Log: log, Metrics: reg})
	mon := alerts.NewMonitor(alerts.MonitorOptions{Store: st, Pauser: sched.Catalog(), Projects: cfg.Projects, Log: log, Wake: del.Wake})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { del.Run(ctx); done <- struct{}{} }()
	go func() {
		mon.RunFreshness(ctx, FreshnessEvery, func() []*importspec.Import {
			var out []*importspec.Import
			for _, e := range sched.Catalog().List(0) {
				out = append(out, e.Import)
			}
			return out
		})
		done <- struct{}{}
	}()
	return func() {
		cancel()
		<-done
		<-done
	}
}
