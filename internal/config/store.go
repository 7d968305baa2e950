package config

import (
	"errors"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Store kinds (Config.StoreKind).
const (
	StoreEmbedded = "embedded" // DuckDB under data_dir, one process
	StorePostgres = "postgres" // PostgreSQL, shared by any number of processes
)

// StoreKind is the kind of store the config selects.
func (c *Config) StoreKind() string {
	if isPostgresURL(c.Store) {
		return StorePostgres
	}
	return StoreEmbedded
}

// StoreRedacted describes the store for logs and errors: a Postgres URL
// without its password (in the user info or a password= parameter).
func (c *Config) StoreRedacted() string {
	if c.StoreKind() == StoreEmbedded {
		return StoreEmbedded
	}
	return redactURL(c.Store)
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL masks a URL's passwords; what does not parse shows only its
// scheme, since the password could be anywhere in it.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		scheme, _, _ := strings.Cut(s, "://")
		return scheme + "://…"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// validateStore checks the store key without ever echoing a password:
// errors show the redacted URL and the parser's reason only.
func (c *Config) validateStore() error {
	switch {
	case c.Store == "" || c.Store == StoreEmbedded:
		return nil
	case !isPostgresURL(c.Store):
		return bad("store", `must be "embedded" (the default) or a postgres:// URL; got %q`, redactURL(c.Store))
	}
	if _, err := url.Parse(c.Store); err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL
		}
		return bad("store", "%s is not a valid URL: %v", redactURL(c.Store), err)
	}
	if _, err := pgconn.ParseConfig(c.Store); err != nil {
		return bad("store", "%s is not a valid PostgreSQL URL: %s", redactURL(c.Store), parseReason(err))
	}
	return nil
}

// parseReason is what follows the connection string in a pgconn parse
// error ("cannot parse `…`: reason"), which pgconn redacts only on a
// best-effort basis.
func parseReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		return msg[i+3:]
	}
	return "cannot parse it"
}
