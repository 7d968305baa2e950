package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/migrate/amplitude"
)

// openMigrations starts the migration service (POST /amplitude) and
// resumes the jobs a previous process left unfinished. The environment
// may give TRIBUTARY_MIGRATE_KEY (32 bytes as hex or base64: interrupted
// jobs then resume by themselves, their credentials sealed with it) and
// TRIBUTARY_AMPLITUDE_URL / TRIBUTARY_AMPLITUDE_EU_URL (proxies, tests).
func openMigrations(ctx context.Context, cfg *config.Config, st store.Store, a *auth.Authenticator, reg *metrics.Registry, log *slog.Logger) (*amplitude.Service, error) {
	jobs, err := amplitude.NewFileJobStore(filepath.Join(cfg.DataDir, "migrations"))
	if err != nil {
		return nil, err
	}
	var key []byte
	if v := os.Getenv("TRIBUTARY_MIGRATE_KEY"); v != "" {
		if key, err = amplitude.ParseKey(v); err != nil {
			return nil, fmt.Errorf("TRIBUTARY_MIGRATE_KEY: %w", err)
		}
	}
	svc, err := amplitude.New(amplitude.Config{
		Store: st, Jobs: jobs, Projects: a, Region: cfg.Region, Metrics: reg, CredentialKey: key,
		Logger:  log.With("component", "migrate"),
		BaseURL: os.Getenv("TRIBUTARY_AMPLITUDE_URL"), EUBaseURL: os.Getenv("TRIBUTARY_AMPLITUDE_EU_URL"),
	})
	if err != nil {
		return nil, err
	}
	if err := svc.Resume(ctx); err != nil {
		svc.Close()
		return nil, err
	}
	return svc, nil
}

// withMigrations serves /amplitude from the migration service ({migrate_url}
// is this server by default) and everything else from the API.
func withMigrations(api, mig http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/amplitude", mig)
	mux.Handle("/amplitude/", mig)
	mux.Handle("/", api)
	return mux
}
