// Package sfserver is a local HTTP server that speaks the REST protocol
// gosnowflake (v1.19) uses to talk to Snowflake, for tests: Snowflake
// cannot run here, so the connector is tested through the real driver
// against this server instead of through mocks of the driver.
//
// It implements what a session of the driver uses: login with a password
// or a key-pair JWT (the signature is verified with the user's public
// key), session-token renewal after 390112, queries answered in Snowflake's
// Arrow wire format (scaled integers for NUMBER, epoch/fraction structs for
// timestamps, field metadata) with the first rows inline in rowsetBase64
// and the rest as gzipped chunks fetched by GET, "still running" (333333)
// answers polled through the result URL, query abort, describe-only
// queries, DESCRIBE TABLE and SHOW PRIMARY KEYS (as JSON rowsets),
// telemetry and session close; change tracking (ALTER TABLE … SET
// CHANGE_TRACKING, SHOW TABLES, CHANGES … AT … END queries: changes.go).
//
// Queries run in an embedded DuckDB holding the tables, so the SQL the
// connector generates is really evaluated. Only what the connector emits
// is supported: SELECTs over one table or a subquery, with ? binds.
package sfserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Config describes the fake account.
type Config struct {
	Account  string // default TESTACCOUNT
	Database string // default TESTDB: the only database
	Schema   string // default PUBLIC: the default schema
	// Users maps user names (upper case) to credentials.
	Users map[string]User
	// InlineRows are sent inline in the query response (default 1000);
	// the rest in chunks of ChunkRows (default 100 000).
	InlineRows, ChunkRows int
	// PlainChunks serves chunks without gzip (real ones are gzipped).
	PlainChunks bool
	// TZOffsetMinutes is the offset TIMESTAMP_TZ values carry on the
	// wire; the instant is kept, so a reader must use the epoch.
	TZOffsetMinutes int
	// AnyStatementCount is an account whose MULTI_STATEMENT_COUNT is 0:
	// a request that does not set the parameter may hold any number of
	// statements (default: 1, Snowflake's default).
	AnyStatementCount bool
}

// User holds a user's password and/or public key.
type User struct {
	Password  string
	PublicKey *rsa.PublicKey
}

// Stats counts protocol events, for tests to check that a path was taken.
type Stats struct {
	Logins, FailedLogins, Renewals, Queries, Polls int
	Chunks, Aborts, Telemetry, Closed              int
}

// Server is a running fake Snowflake endpoint.
type Server struct {
	cfg  Config
	db   *sql.DB
	http *httptest.Server

	dml      sync.Mutex // Exec, AddColumn and DropTable, one at a time
	mu       sync.Mutex
	tables   map[string]*table
	sessions map[string]*session // by session token
	masters  map[string]*session // by master token
	queries  map[string]*query   // by query id
	byReq    map[string]*query   // by request id, for aborts
	polls    int
	stats    Stats
	seq      int
}

type session struct {
	id               int64
	user             string
	database, schema string
	token, master    string
	expired          bool
	results          []string // result tables to drop on close
}

// New starts a server; Close stops it.
func New(cfg Config) (*Server, error) {
	if cfg.Account == "" {
		cfg.Account = "TESTACCOUNT"
	}
	if cfg.Database == "" {
		cfg.Database = "TESTDB"
	}
	if cfg.Schema == "" {
		cfg.Schema = "PUBLIC"
	}
	if cfg.InlineRows == 0 {
		cfg.InlineRows = 1000
	}
	if cfg.ChunkRows == 0 {
		cfg.ChunkRows = 100_000
	}
	init := func(e driver.ExecerContext) error {
		_, err := e.ExecContext(context.Background(), "SET TimeZone = 'UTC'", nil)
		return err
	}
	conn, err := duckdb.NewConnector("?threads=2&memory_limit=2GB", init)
	if err != nil {
		return nil, fmt.Errorf("sfserver: %w", err)
	}
	db := sql.OpenDB(conn)
	setup := []string{
		"ATTACH ':memory:' AS " + quote(cfg.Database),
		"CREATE SCHEMA " + quote(cfg.Database) + "." + quote(cfg.Schema),
		"CREATE SCHEMA memory.results",
	}
	for _, q := range setup {
		if _, err := db.Exec(q); err != nil {
			db.Close()
			return nil, fmt.Errorf("sfserver: %s: %w", q, err)
		}
	}
	s := &Server{cfg: cfg, db: db, tables: map[string]*table{}, sessions: map[string]*session{},
		masters: map[string]*session{}, queries: map[string]*query{}, byReq: map[string]*query{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /session/v1/login-request", s.login)
	mux.HandleFunc("POST /session/token-request", s.renew)
	mux.HandleFunc("POST /session", s.closeSession)
	mux.HandleFunc("POST /session/heartbeat", s.withSession(func(w http.ResponseWriter, _ *http.Request, _ *session) { ok(w, nil) }))
	mux.HandleFunc("POST /telemetry/send", s.telemetry)
	mux.HandleFunc("POST /queries/v1/query-request", s.withSession(s.queryRequest))
	mux.HandleFunc("POST /queries/v1/abort-request", s.withSession(s.abort))
	mux.HandleFunc("GET /queries/{id}/result", s.withSession(s.result))
	mux.HandleFunc("GET /monitoring/queries/{id}", s.withSession(s.monitor))
	mux.HandleFunc("GET /chunks/{id}/{n}", s.chunk)
	s.http = httptest.NewServer(mux)
	return s, nil
}

// Close stops the server and drops its database.
func (s *Server) Close() {
	s.http.Close()
	s.db.Close()
}

// Host and Port locate the server for gosnowflake's Config (Protocol "http").
func (s *Server) Host() string {
	return strings.Split(strings.TrimPrefix(s.http.URL, "http://"), ":")[0]
}

// Port is the server's TCP port.
func (s *Server) Port() int {
	u, _ := url.Parse(s.http.URL)
	p, _ := strconv.Atoi(u.Port())
	return p
}

// Account is the account name to log in to.
func (s *Server) Account() string { return s.cfg.Account }

// DB is the DuckDB behind the server, for fixtures.
func (s *Server) DB() *sql.DB { return s.db }

// Stats returns the protocol counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// ExpireSessions makes every current session token expired, as Snowflake
// does after its validity: the next request gets 390112 and must renew.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, se := range s.sessions {
		se.expired = true
	}
}

// SetPolls makes each following SELECT answer "still running" (333333)
// n times before its result; each poll waits a little, as Snowflake's
// result endpoint holds the request while the query runs.
func (s *Server) SetPolls(n int) {
	s.mu.Lock()
	s.polls = n
	s.mu.Unlock()
}

func (s *Server) newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

type loginRequest struct {
	Data struct {
		AccountName   string `json:"ACCOUNT_NAME"`
		LoginName     string `json:"LOGIN_NAME"`
		Password      string `json:"PASSWORD"`
		Authenticator string `json:"AUTHENTICATOR"`
		Token         string `json:"TOKEN"`
	} `json:"data"`
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d := req.Data
	fail := func(code, msg string) {
		s.mu.Lock()
		s.stats.FailedLogins++
		s.mu.Unlock()
		writeJSON(w, map[string]any{"data": map[string]any{"authnMethod": d.Authenticator}, "code": code, "message": msg, "success": false})
	}
	name := strings.ToUpper(d.LoginName)
	user, known := s.cfg.Users[name]
	switch {
	case !strings.EqualFold(d.AccountName, s.cfg.Account):
		fail("390100", "Incorrect username or password was specified.")
		return
	case strings.EqualFold(d.Authenticator, "SNOWFLAKE_JWT"):
		var err error
		name, err = verifyJWT(d.Token, strings.ToUpper(s.cfg.Account), func(u string) *rsa.PublicKey {
			return s.cfg.Users[u].PublicKey
		})
		if err != nil {
			fail("390144", "JWT token is invalid. "+err.Error())
			return
		}
	case !known || user.Password == "" || user.Password != d.Password:
		fail("390100", "Incorrect username or password was specified.")
		return
	}
	q := r.URL.Query()
	se := &session{user: name, database: s.cfg.Database, schema: s.cfg.Schema}
	if db := q.Get("databaseName"); db != "" {
		if parts, err := splitName(db); err != nil || parts[0] != s.cfg.Database {
			fail("390201", fmt.Sprintf("The requested database does not exist or not authorized: %s.", db))
			return
		}
	}
	if sc := q.Get("schemaName"); sc != "" {
		if parts, err := splitName(sc); err == nil {
			se.schema = parts[0]
		}
	}
	s.mu.Lock()
	s.seq++
	se.id = int64(s.seq)
	se.token, se.master = s.newToken(), s.newToken()
	s.sessions[se.token], s.masters[se.master] = se, se
	s.stats.Logins++
	s.mu.Unlock()
	ok(w, map[string]any{
		"token": se.token, "masterToken": se.master, "sessionId": se.id,
		"validityInSeconds": 3600, "masterValidityInSeconds": 14400,
		"serverVersion": "sfserver", "displayUserName": se.user,
		"parameters":  []map[string]any{{"name": "TIMEZONE", "value": "UTC"}, {"name": "CLIENT_RESULT_CHUNK_SIZE", "value": 160}},
		"sessionInfo": map[string]any{"databaseName": se.database, "schemaName": se.schema, "warehouseName": q.Get("warehouse"), "roleName": q.Get("roleName")},
	})
}

// token extracts the token of `Authorization: Snowflake Token="…"`.
func token(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if i := strings.Index(h, `Token="`); i >= 0 {
		return strings.TrimSuffix(h[i+len(`Token="`):], `"`)
	}
	return ""
}

func (s *Server) withSession(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		se, known := s.sessions[token(r)]
		expired := known && se.expired
		s.mu.Unlock()
		switch {
		case !known:
			writeJSON(w, map[string]any{"code": "390104", "message": "User must login again to access the service.", "success": false})
		case expired:
			writeJSON(w, map[string]any{"code": "390112", "message": "Your session has expired. Please login again.", "success": false})
		default:
			h(w, r, se)
		}
	}
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	var body struct {
		OldSessionToken string `json:"oldSessionToken"`
		RequestType     string `json:"requestType"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	s.mu.Lock()
	se, known := s.masters[token(r)]
	if !known || body.RequestType != "RENEW" || se.token != body.OldSessionToken {
		s.mu.Unlock()
		writeJSON(w, map[string]any{"code": "390114", "message": "Authentication token has expired. The user must authenticate again.", "success": false})
		return
	}
	delete(s.sessions, se.token)
	se.token, se.expired = s.newToken(), false
	s.sessions[se.token] = se
	s.stats.Renewals++
	s.mu.Unlock()
	ok(w, map[string]any{"sessionToken": se.token, "validityInSecondsST": 3600, "masterToken": se.master,
		"validityInSecondsMT": 14400, "sessionId": se.id})
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("delete") != "true" {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	se, known := s.sessions[token(r)]
	var drop []string
	if known {
		delete(s.sessions, se.token)
		delete(s.masters, se.master)
		drop = se.results
		for _, id := range se.results {
			delete(s.queries, id)
		}
		s.stats.Closed++
	}
	s.mu.Unlock()
	for _, id := range drop {
		_, _ = s.db.Exec("DROP TABLE IF EXISTS memory.results." + quote("r_"+id))
	}
	ok(w, nil)
}

func (s *Server) telemetry(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.stats.Telemetry++
	s.mu.Unlock()
	ok(w, nil)
}

func ok(w http.ResponseWriter, data any) {
	writeJSON(w, map[string]any{"data": data, "code": nil, "message": nil, "success": true})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// pollWait is how long a result poll holds before answering "still running".
const pollWait = 20 * time.Millisecond
