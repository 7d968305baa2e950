package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/scheduler"
	"github.com/tributary-dev/tributary/scheduler/alerts"
)

// defaultAlertWait bounds how long `tributary sync` spends delivering
// alerts before it exits: long enough for a webhook that answers, short
// enough that a dead one does not hold a cron job up.
const defaultAlertWait = 5 * time.Second

// syncAlerts is `tributary sync`'s share of the projects' alerts: the
// rules watch its run as they watch serve's (failure, recovery, refused
// rows, volume with action pause, schema), against the same store, and
// the outbox is delivered before the command exits.
type syncAlerts struct {
	mon *alerts.Monitor
	del *alerts.Deliverer
}

// newSyncAlerts returns nil when no project of cfg has alerts.
func newSyncAlerts(cfg *config.Config, st store.Store, cat *scheduler.Catalog, log *slog.Logger) *syncAlerts {
	on := false
	for _, p := range cfg.Projects {
		on = on || p.Alerts != nil
	}
	if !on {
		return nil
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	owner := fmt.Sprintf("%s/%d/%s/sync-alerts", host, os.Getpid(), hex.EncodeToString(b[:]))
	return &syncAlerts{
		mon: alerts.NewMonitor(alerts.MonitorOptions{Store: st, Pauser: cat, Projects: cfg.Projects, Log: log}),
		del: alerts.NewDeliverer(alerts.DelivererOptions{Outbox: st, Projects: cfg.Projects, Owner: owner, Log: log}),
	}
}

// monitor is the scheduler's Monitor: nil (not a nil *Monitor) when off.
func (a *syncAlerts) monitor() scheduler.Monitor {
	if a == nil {
		return nil
	}
	return a.mon
}

// finish checks im's freshness rule (no serve may be running to do it)
// and delivers the outbox's due alerts for at most wait. What is left
// stays in the outbox for the next sync or serve; it never fails the
// sync.
func (a *syncAlerts) finish(ctx context.Context, im *importspec.Import, wait time.Duration, stderr io.Writer) {
	if a == nil {
		return
	}
	if err := a.mon.CheckFreshness(ctx, []*importspec.Import{im}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "tributary: alerts: freshness check: %v\n", err)
	}
	if wait <= 0 {
		return
	}
	if n := a.del.Flush(ctx, wait); n > 0 {
		fmt.Fprintf(stderr, "tributary: %d alert(s) not delivered within --alert-wait %s; they stay in the outbox for the next `tributary sync` or `tributary serve`\n", n, wait)
	}
}
