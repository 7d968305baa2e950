// Package config loads and validates the server's YAML configuration.
// Every error names the file, the key and what is wrong, because a server
// that starts with a half-understood config is worse than one that refuses.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Region is where a server (and a project's data) lives.
type Region string

const (
	RegionUS Region = "us"
	RegionEU Region = "eu"
	RegionIN Region = "in"
)

// Host is the public API host name prefix of the region (spec §4.1).
func (r Region) Host() string {
	switch r {
	case RegionEU:
		return "api-eu"
	case RegionIN:
		return "api-in"
	}
	return "api"
}

// Role of a service account; writes need owner or admin.
type Role string

const (
	RoleOwner    Role = "owner"
	RoleAdmin    Role = "admin"
	RoleAnalyst  Role = "analyst"
	RoleConsumer Role = "consumer"
)

// CanWrite reports whether the role may import data or change configuration.
func (r Role) CanWrite() bool { return r == RoleOwner || r == RoleAdmin }

// IDManagement is the project's identity merge system; ingest/identity
// takes it as its Mode.
type IDManagement string

const (
	IDOriginal   IDManagement = "original"
	IDSimplified IDManagement = "simplified"
)

// ServiceAccount authenticates API calls with HTTP Basic username:secret.
type ServiceAccount struct {
	Username string `yaml:"username"`
	Secret   string `yaml:"secret"`
	Role     Role   `yaml:"role"`
}

// RateLimit caps a project's ingestion on a rolling one-minute window.
type RateLimit struct {
	// BytesPerMinute of uncompressed JSON; Mixpanel's public limit is 2 GB.
	BytesPerMinute ByteSize `yaml:"bytes_per_minute"`
}

// Project is one analytics project served by this server.
type Project struct {
	ID              int64            `yaml:"id"`
	Name            string           `yaml:"name"`
	Token           string           `yaml:"token"`
	APISecret       string           `yaml:"api_secret"`
	Region          Region           `yaml:"region"`
	IDManagement    IDManagement     `yaml:"id_management"`
	ServiceAccounts []ServiceAccount `yaml:"service_accounts"`
	RateLimit       *RateLimit       `yaml:"rate_limit"`
	LookupTables    []LookupTable    `yaml:"lookup_tables"`
	// CORSAllowedOrigins, when set, are the only browser origins that may
	// send this project's data to the token endpoints (cors.go).
	CORSAllowedOrigins []string `yaml:"cors_allowed_origins"`
	// Alerts, when set, watch the project's sync runs (alerts.go).
	Alerts *Alerts `yaml:"alerts"`
}

// LookupTable declares a lookup table; PUT /lookup-tables/{id} fills it.
// Reads enrich events (or user profiles) whose Property holds a key of
// the table with the table's other columns.
type LookupTable struct {
	ID       string `yaml:"id"`
	Name     string `yaml:"name"`
	Property string `yaml:"property"` // the event or user property whose value is the key
	// MapsTo is "event" (default) or "user": whose property Property is.
	MapsTo string `yaml:"maps_to"`
}

// String is the configuration spelling.
func (m IDManagement) String() string { return string(m) }

// IDMode is the project's ID management with the default (Simplified)
// resolved: what the identity graph and the stores take.
func (p *Project) IDMode() IDManagement {
	if p.IDManagement == IDOriginal {
		return IDOriginal
	}
	return IDSimplified
}

// LookupTable returns the project's lookup table with that id.
func (p *Project) LookupTable(id string) (*LookupTable, bool) {
	for i := range p.LookupTables {
		if p.LookupTables[i].ID == id {
			return &p.LookupTables[i], true
		}
	}
	return nil, false
}

// Config is the whole server configuration.
type Config struct {
	Listen  string `yaml:"listen"`
	DataDir string `yaml:"data_dir"`
	Region  Region `yaml:"region"`
	// Store is "" or "embedded" (DuckDB under data_dir), or a postgres://
	// URL (store.go) of a database any number of processes may share.
	Store      string   `yaml:"store"`
	LogLevel   string   `yaml:"log_level"`
	LogFormat  string   `yaml:"log_format"` // text or json
	ImportsDir string   `yaml:"imports_dir"`
	OAuthTTL   Duration `yaml:"oauth_token_ttl"`
	// MemoryLimit is the process's memory budget (e.g. "512MB", memory.go),
	// split between the embedded store's DuckDB and the Go heap's soft
	// limit by server.NewMemoryBudget. "" = none.
	MemoryLimit string `yaml:"memory_limit"`
	// DedupKeys is deprecated and ignored ("memory" or "disk" are still
	// accepted, so old files load): the embedded store always keeps recent
	// dedup keys in memory and older ones in sorted files beside the
	// database. The server logs a warning when it is set.
	DedupKeys string `yaml:"dedup_keys"`
	// MigrateListen serves the migration service ({migrate_url}, POST
	// /amplitude) on its own address; "" serves it on Listen.
	MigrateListen string `yaml:"migrate_listen"`
	// TLSCertFile and TLSKeyFile (PEM; the certificate file may hold the
	// chain) make Listen serve HTTPS with HTTP/2. Both or neither. The pair
	// is reloaded when the files change, so a renewal needs no restart.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// RedirectHTTPListen, with TLS, is a plain-HTTP address that only
	// redirects (308) to the same URL over https on Listen's port.
	RedirectHTTPListen string `yaml:"redirect_http_listen"`
	// The HTTP edge's limits (edges.go): open connections, the slowest
	// request body, requests per client address on the token endpoints.
	MaxConnections      int       `yaml:"max_connections"`
	BodyMinRate         *ByteSize `yaml:"body_min_rate"`
	IPRequestsPerSecond *int      `yaml:"ip_requests_per_second"`
	// SyncLease is how long a sync run's claim holds unless its process
	// renews it (every third of it): when a process dies, another takes
	// its runs over within about 1.5 leases. Shorter means faster
	// takeover; it must stay well above the store's worst stall.
	SyncLease Duration `yaml:"sync_lease"`
	// LedgerRetention is how long the row-level ledger of sync runs and
	// the quarantine of refused rows are kept (default 336h, 14 days).
	LedgerRetention Duration `yaml:"ledger_retention"`
	// MetricsToken, when set, lets a scraper read /metrics with it as a
	// Bearer token instead of a project credential.
	MetricsToken string `yaml:"metrics_token"`
	// AllowedPaths are the directories and files import sources may read
	// Parquet/CSV/JSON files from (DuckDB sources; a database file's own
	// `path` needs none). Empty: none. Never overlapping data_dir
	// (server.SourceOptions checks).
	AllowedPaths []string  `yaml:"allowed_paths"`
	Projects     []Project `yaml:"projects"`
	// Connections are the warehouse connections imports may read
	// (connections.go); imports created through the app API can only
	// name one of them.
	Connections []Connection `yaml:"connections"`
	// ConnectionKey (${VAR}: 32 bytes as 64 hex digits or base64)
	// enables owner-only connection creation through the app API and
	// encrypts those connections' secrets at rest. "": no such API.
	ConnectionKey string `yaml:"connection_key"`
	// ConnectionHostsAllowed are the only hosts ("host" for any port, or
	// "host:port") a connection created through the API may reach.
	ConnectionHostsAllowed []string `yaml:"connection_hosts_allowed"`
	// MinScheduleInterval is the shortest interval an import's schedule
	// may run at (default 1m, at least 1s).
	MinScheduleInterval Duration `yaml:"min_schedule_interval"`
	// Console serves the web console at / (nil: on; false: off).
	Console *bool `yaml:"console"`
	// ConsoleSessionTTL is how long a console sign-in lasts from the
	// moment it was made (default 12h, at least 1s).
	ConsoleSessionTTL Duration `yaml:"console_session_ttl"`

	file string
}

// File is the path the configuration was read from.
func (c *Config) File() string { return c.file }

// DefaultRateLimit is Mixpanel's public per-project ceiling.
const DefaultRateLimit ByteSize = 2 << 30

// Load reads, interpolates, decodes and validates a config file.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return Parse(path, raw, os.LookupEnv)
}

// LoadForImports is Load for the commands that read import files but
// neither serve nor open the store (validate, preview, sources test):
// the server's own secrets (project and service-account secrets,
// metrics_token, store, connection_key) may have their variables unset;
// connections' fields may not.
func LoadForImports(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return parse(path, raw, expander{lookup: os.LookupEnv, lenient: true})
}

// Parse is Load without the file system; lookup resolves ${VAR}.
// Values are expanded one by one after parsing (expand.go); YAML aliases
// and merge keys are refused, so every secret is written where it is used.
func Parse(path string, raw []byte, lookup func(string) (string, bool)) (*Config, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return parse(path, raw, expander{lookup: lookup})
}

func parse(path string, raw []byte, x expander) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := RefuseAliases(&doc); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	var raws []map[string]string
	text := []byte{}
	if len(doc.Content) > 0 {
		raws = rawConnections(doc.Content[0])
		if err := x.expand(&doc, ""); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		var err error
		if text, err = yaml.Marshal(doc.Content[0]); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true) // a misspelt key is an error, not a silent default
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // empty file: validation says what is missing
		return nil, fmt.Errorf("config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	for i := range c.Connections {
		if i < len(raws) {
			c.Connections[i].Raw = raws[i]
		}
	}
	c.file = path
	c.setDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &c, nil
}

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.Region == "" {
		c.Region = RegionUS
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
	if c.ImportsDir == "" {
		c.ImportsDir = "configs/imports"
	}
	if c.OAuthTTL == 0 {
		c.OAuthTTL = Duration(3600e9)
	}
	if c.SyncLease == 0 {
		c.SyncLease = Duration(30e9)
	}
	if c.LedgerRetention == 0 {
		c.LedgerRetention = Duration(336 * 3600e9)
	}
	if c.MinScheduleInterval == 0 {
		c.MinScheduleInterval = Duration(60e9)
	}
	if c.ConsoleSessionTTL == 0 {
		c.ConsoleSessionTTL = Duration(12 * 3600e9)
	}
	for i := range c.Projects {
		p := &c.Projects[i]
		if p.Region == "" {
			p.Region = RegionUS
		}
		if p.IDManagement == "" {
			p.IDManagement = IDSimplified
		}
		if p.RateLimit == nil {
			p.RateLimit = &RateLimit{}
		}
		if p.RateLimit.BytesPerMinute == 0 {
			p.RateLimit.BytesPerMinute = DefaultRateLimit
		}
	}
}
