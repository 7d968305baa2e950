package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/internal/config"
)

// LedgerPruneEvery is how often the server deletes ledger entries and
// quarantined rows older than ledger_retention: one indexed (pgstore) or
// columnar (duckstore) delete, cheap at any cadence; hourly keeps the
// ledger at most an hour past its retention.
const LedgerPruneEvery = time.Hour

// ledgerPruner is the part of the store pruning needs.
type ledgerPruner interface {
	PruneLedger(ctx context.Context, beforeMs int64) (int64, error)
}

// startLedgerPrune prunes the ledger now and every LedgerPruneEvery
// until the returned stop is called.
func startLedgerPrune(cfg *config.Config, st ledgerPruner, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	keep := time.Duration(cfg.LedgerRetention)
	go func() {
		defer close(done)
		t := time.NewTicker(LedgerPruneEvery)
		defer t.Stop()
		for {
			n, err := st.PruneLedger(ctx, time.Now().Add(-keep).UnixMilli())
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("pruning the sync ledger", "err", err)
			case n > 0:
				log.Info("sync ledger pruned", "entries", n, "retention", keep)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
