package config

import (
	"fmt"
	"net"
	"strings"
)

// FieldError names the key that is wrong, as a path into the file.
type FieldError struct {
	Key     string
	Problem string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Problem }

func bad(key, format string, args ...any) error {
	return &FieldError{Key: key, Problem: fmt.Sprintf(format, args...)}
}

// The values dedup_keys (deprecated, ignored) accepts.
const (
	DedupMemory = "memory"
	DedupDisk   = "disk"
)

func (c *Config) validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "must be host:port, got %q", c.Listen)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	if !validRegion(c.Region) {
		return bad("region", "must be one of us, eu, in; got %q", c.Region)
	}
	if err := c.validateStore(); err != nil {
		return err
	}
	if err := c.validateMemory(); err != nil {
		return err
	}
	if err := c.validateEdges(); err != nil {
		return err
	}
	switch c.DedupKeys {
	case "", DedupMemory, DedupDisk:
	default:
		return bad("dedup_keys", "is deprecated and ignored, but when set must be %q or %q; got %q", DedupMemory, DedupDisk, c.DedupKeys)
	}
	if c.SyncLease < Duration(1e9) {
		return bad("sync_lease", "must be at least 1s")
	}
	if c.LedgerRetention < Duration(3600e9) {
		return bad("ledger_retention", "must be at least 1h")
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return bad("log_level", "must be one of debug, info, warn, error; got %q", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return bad("log_format", "must be text or json; got %q", c.LogFormat)
	}
	if c.MetricsToken != "" && len(c.MetricsToken) < 16 {
		return bad("metrics_token", "must be at least 16 characters; use ${VAR}")
	}
	if c.OAuthTTL < Duration(60e9) {
		return bad("oauth_token_ttl", "must be at least 1m")
	}
	if len(c.Projects) == 0 {
		return bad("projects", "at least one project is required")
	}
	if c.MinScheduleInterval < Duration(1e9) {
		return bad("min_schedule_interval", "must be at least 1s")
	}
	if c.ConsoleSessionTTL < Duration(1e9) {
		return bad("console_session_ttl", "must be at least 1s")
	}
	ids := map[int64]string{}
	creds := map[string]string{} // token/secret value -> key that declared it
	accounts := map[string]accountSeen{}
	for i := range c.Projects {
		if err := c.Projects[i].validate(fmt.Sprintf("projects[%d]", i), c.Listen, ids, creds, accounts); err != nil {
			return err
		}
	}
	return c.validateConnections()
}

// validateTLS checks the keys' shape; whether the files hold a usable key
// pair is checked when the server loads them (naming the same keys).
func (c *Config) validateTLS() error {
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		return bad("tls_key_file", "must be set when tls_cert_file is set")
	case c.TLSKeyFile != "" && c.TLSCertFile == "":
		return bad("tls_cert_file", "must be set when tls_key_file is set")
	}
	if c.RedirectHTTPListen == "" {
		return nil
	}
	if c.TLSCertFile == "" {
		return bad("redirect_http_listen", "needs tls_cert_file and tls_key_file: it redirects to the HTTPS listener")
	}
	if _, _, err := net.SplitHostPort(c.RedirectHTTPListen); err != nil {
		return bad("redirect_http_listen", "must be host:port, got %q", c.RedirectHTTPListen)
	}
	return nil
}

// TLS reports whether Listen serves HTTPS.
func (c *Config) TLS() bool { return c.TLSCertFile != "" }

// ConsoleOn reports whether the web console is served (the default).
func (c *Config) ConsoleOn() bool { return c.Console == nil || *c.Console }

type accountSeen struct {
	key, secret string
}

func (p *Project) validate(key, listen string, ids map[int64]string, creds map[string]string, accounts map[string]accountSeen) error {
	if p.ID <= 0 {
		return bad(key+".id", "must be a positive integer")
	}
	if prev, ok := ids[p.ID]; ok {
		return bad(key+".id", "%d is already used by %s", p.ID, prev)
	}
	ids[p.ID] = key
	if strings.TrimSpace(p.Name) == "" {
		return bad(key+".name", "must not be empty")
	}
	for _, c := range []struct{ field, value string }{{"token", p.Token}, {"api_secret", p.APISecret}} {
		k := key + "." + c.field
		if len(c.value) < 8 {
			return bad(k, "must be at least 8 characters")
		}
		if prev, ok := creds[c.value]; ok {
			return bad(k, "must be unique; the same value is used by %s", prev)
		}
		creds[c.value] = k
	}
	if !validRegion(p.Region) {
		return bad(key+".region", "must be one of us, eu, in; got %q", p.Region)
	}
	if p.IDManagement != IDOriginal && p.IDManagement != IDSimplified {
		return bad(key+".id_management", "must be original or simplified; got %q", p.IDManagement)
	}
	for j, sa := range p.ServiceAccounts {
		k := fmt.Sprintf("%s.service_accounts[%d]", key, j)
		if strings.TrimSpace(sa.Username) == "" {
			return bad(k+".username", "must not be empty")
		}
		if len(sa.Secret) < 8 {
			return bad(k+".secret", "must be at least 8 characters")
		}
		switch sa.Role {
		case RoleOwner, RoleAdmin, RoleAnalyst, RoleConsumer:
		default:
			return bad(k+".role", "must be one of owner, admin, analyst, consumer; got %q", sa.Role)
		}
		// One account may be a member of several projects, but it has one secret.
		if prev, ok := accounts[sa.Username]; ok && prev.secret != sa.Secret {
			return bad(k+".secret", "differs from the secret of the same account at %s", prev.key)
		}
		accounts[sa.Username] = accountSeen{key: k, secret: sa.Secret}
	}
	if err := p.validateCORS(key + ".cors_allowed_origins"); err != nil {
		return err
	}
	if p.Alerts != nil {
		if err := p.Alerts.validate(key+".alerts", listen); err != nil {
			return err
		}
	}
	if p.RateLimit.BytesPerMinute < 0 {
		return bad(key+".rate_limit.bytes_per_minute", "must be positive")
	}
	seen := map[string]string{}
	for j := range p.LookupTables {
		lt := &p.LookupTables[j]
		k := fmt.Sprintf("%s.lookup_tables[%d]", key, j)
		if strings.TrimSpace(lt.ID) == "" || strings.ContainsAny(lt.ID, "/?#") {
			return bad(k+".id", "must be a non-empty id without '/', '?' or '#'; got %q", lt.ID)
		}
		if prev, ok := seen[lt.ID]; ok {
			return bad(k+".id", "%q is already used by %s", lt.ID, prev)
		}
		seen[lt.ID] = k
		if strings.TrimSpace(lt.Name) == "" {
			return bad(k+".name", "must not be empty")
		}
		if strings.TrimSpace(lt.Property) == "" {
			return bad(k+".property", "must name the event or user property whose value is the table's key")
		}
		switch lt.MapsTo {
		case "":
			lt.MapsTo = "event"
		case "event", "user":
		default:
			return bad(k+".maps_to", "must be event or user; got %q", lt.MapsTo)
		}
	}
	return nil
}

func validRegion(r Region) bool { return r == RegionUS || r == RegionEU || r == RegionIN }
