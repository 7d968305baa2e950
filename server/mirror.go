package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/scheduler"
)

// forgetRemovedMirrorsTimeout bounds the start's cleanup of removed
// Mirror imports: a warehouse that does not answer must not hold the start.
const forgetRemovedMirrorsTimeout = 30 * time.Second

// forgetRemovedMirrors drops, before any run starts, what the Mirror
// imports whose file left imports_dir since the last start kept (their
// state, their Postgres slot and publication); on a shared Postgres store
// it only logs them (Catalog.ForgetRemovedMirrors says why). A failure is
// logged, not fatal: the next start tries again.
func forgetRemovedMirrors(ctx context.Context, cat *scheduler.Catalog, st store.Store, shared bool, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, forgetRemovedMirrorsTimeout)
	defer cancel()
	if err := cat.ForgetRemovedMirrors(ctx, st, shared); err != nil {
		log.Error("dropping what removed mirror imports kept; the next start tries again", "err", err)
	}
}
