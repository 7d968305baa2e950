package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/tributary-dev/tributary/console"
	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/internal/config"
)

// withConsole serves the web console at / (unless the config says
// `console: false`) and makes the APIs it calls accept its session
// cookie. Call it before serving: it installs a's session check.
func withConsole(h http.Handler, cfg *config.Config, a *auth.Authenticator, log *slog.Logger) http.Handler {
	if !cfg.ConsoleOn() {
		return h
	}
	c := console.New(console.Options{Accounts: a, TTL: time.Duration(cfg.ConsoleSessionTTL), Secure: cfg.TLS(),
		Region: string(cfg.Region), Logger: log.With("component", "console")})
	a.SetSessions(c.Session)
	return c.Wrap(h)
}
