package integration

import (
	"github.com/tributary-dev/tributary/integration/procstat"

	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// binPath is the server binary built once by TestMain, so every test runs
// the same executable a user would run, not an in-process copy.
var binPath string

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tributary-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "tributary")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", binPath, "./cmd/tributary")
	cmd.Dir = ".." // the repository root; go test runs in the package directory
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "integration: building the server failed: %v\n%s", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "integration: built server in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// Fixed credentials of the standard test configuration.
const (
	mainID       = 1
	mainToken    = "main-token-0001"
	mainSecret   = "main-secret-0001"
	ownerSA      = "it-owner"
	ownerSecret  = "it-owner-secret-1"
	analystSA    = "it-analyst"
	analystSec   = "it-analyst-secret-1"
	multiSA      = "it-multi" // member of projects 1 and 3: needs project_id
	multiSecret  = "it-multi-secret-1"
	euID         = 2
	euToken      = "eu-token-00000002"
	euSecret     = "eu-secret-0000002"
	euSA         = "it-eu-owner"
	euSASecret   = "it-eu-owner-secret"
	otherID      = 3
	otherToken   = "other-token-0003"
	otherSecret  = "other-secret-0003"
	tinyID       = 4 // a project with a tiny rate limit
	tinyToken    = "tiny-token-00004"
	tinySecret   = "tiny-secret-0004"
	tinyLimitKiB = 2
)

type saConfig struct {
	Username string `yaml:"username"`
	Secret   string `yaml:"secret"`
	Role     string `yaml:"role"`
}

type rateLimitConfig struct {
	BytesPerMinute int64 `yaml:"bytes_per_minute"`
}

type projectConfig struct {
	ID              int64            `yaml:"id"`
	Name            string           `yaml:"name"`
	Token           string           `yaml:"token"`
	APISecret       string           `yaml:"api_secret"`
	Region          string           `yaml:"region"`
	IDManagement    string           `yaml:"id_management"`
	ServiceAccounts []saConfig       `yaml:"service_accounts,omitempty"`
	RateLimit       *rateLimitConfig `yaml:"rate_limit,omitempty"`
	LookupTables    []lookupConfig   `yaml:"lookup_tables,omitempty"`
	CORSOrigins     []string         `yaml:"cors_allowed_origins,omitempty"`
	Alerts          map[string]any   `yaml:"alerts,omitempty"`
}

type lookupConfig struct {
	ID       string `yaml:"id"`
	Name     string `yaml:"name"`
	Property string `yaml:"property"`
	MapsTo   string `yaml:"maps_to,omitempty"`
}

// serverConfig is the YAML file minus listen and data_dir, which the tests
// always pass as flags (port 0, a per-test directory).
type serverConfig struct {
	Region      string          `yaml:"region"`
	LogLevel    string          `yaml:"log_level"`
	OAuthTTL    string          `yaml:"oauth_token_ttl,omitempty"`
	MemoryLimit string          `yaml:"memory_limit,omitempty"`
	ImportsDir  string          `yaml:"imports_dir,omitempty"`
	Store       string          `yaml:"store,omitempty"`      // a postgres:// URL; "" embedded
	SyncLease   string          `yaml:"sync_lease,omitempty"` // e.g. 2s
	MetricsTok  string          `yaml:"metrics_token,omitempty"`
	TLSCert     string          `yaml:"tls_cert_file,omitempty"`
	TLSKey      string          `yaml:"tls_key_file,omitempty"`
	Redirect    string          `yaml:"redirect_http_listen,omitempty"`
	MigrateOn   string          `yaml:"migrate_listen,omitempty"`
	Projects    []projectConfig `yaml:"projects"`
	// MinScheduleInterval is the schedule floor, e.g. 5s (default 1m).
	MinScheduleInterval string `yaml:"min_schedule_interval,omitempty"`
	// Connections are the operator's warehouse connections: id, kind,
	// projects and the kind's fields.
	Connections []map[string]any `yaml:"connections,omitempty"`
	// ConnectionKey enables connections through the app API;
	// ConnectionHosts are the hosts they may reach.
	ConnectionKey   string   `yaml:"connection_key,omitempty"`
	ConnectionHosts []string `yaml:"connection_hosts_allowed,omitempty"`
	// Extra holds top-level keys no other field covers (e.g.
	// max_connections), written as they are.
	Extra map[string]any `yaml:",inline"`
}

// defaultConfig is a US server with a US project (owner, analyst and a
// two-project account), an EU project, a second US project and a project
// whose rate limit a test can exhaust in two requests.
func defaultConfig() serverConfig {
	return serverConfig{
		Region: "us", LogLevel: "info", MemoryLimit: "512MB",
		Projects: []projectConfig{
			{ID: mainID, Name: "Main", Token: mainToken, APISecret: mainSecret, Region: "us", IDManagement: "simplified",
				ServiceAccounts: []saConfig{
					{ownerSA, ownerSecret, "owner"}, {analystSA, analystSec, "analyst"}, {multiSA, multiSecret, "admin"},
				},
				LookupTables: []lookupConfig{{ID: "items", Name: "Items", Property: "item_id"}}},
			{ID: euID, Name: "EU", Token: euToken, APISecret: euSecret, Region: "eu", IDManagement: "simplified",
				ServiceAccounts: []saConfig{{euSA, euSASecret, "owner"}}},
			{ID: otherID, Name: "Other", Token: otherToken, APISecret: otherSecret, Region: "us", IDManagement: "original",
				ServiceAccounts: []saConfig{{multiSA, multiSecret, "admin"}}},
			{ID: tinyID, Name: "Tiny", Token: tinyToken, APISecret: tinySecret, Region: "us", IDManagement: "simplified",
				RateLimit: &rateLimitConfig{BytesPerMinute: tinyLimitKiB << 10}},
		},
	}
}

// server is one Tributary child process and the data directory it keeps
// across restarts.
type server struct {
	t       testing.TB
	Cfg     serverConfig // written afresh on every start, so a test may change it between runs
	dataDir string
	cfgPath string
	// TLSClient, when set, trusts the test CA of a server started with TLS.
	TLSClient *http.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error // receives cmd.Wait's result once
	URL  string     // http://127.0.0.1:PORT of the current run (https:// with TLS)
	PID  int
	logs *tailBuffer
}

// startServer starts a server on a fresh data directory and stops it when
// the test ends; on failure the end of its stderr is logged.
func startServer(t testing.TB, cfg serverConfig) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{t: t, Cfg: cfg, dataDir: filepath.Join(dir, "data"), cfgPath: filepath.Join(dir, "tributary.yaml"),
		logs: &tailBuffer{max: 64 << 10}}
	s.Start()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("server did not shut down cleanly on SIGTERM: %v", err)
		}
		if t.Failed() {
			s.logFailure(t)
		}
	})
	return s
}

// Start runs the server on the data directory and waits for its
// "listening on" line.
func (s *server) Start() {
	s.t.Helper()
	raw, err := yaml.Marshal(s.Cfg)
	if err != nil {
		s.t.Fatalf("config: %v", err)
	}
	if err := os.WriteFile(s.cfgPath, raw, 0o600); err != nil {
		s.t.Fatal(err)
	}
	ready := make(chan string, 1)
	cmd := exec.Command(binPath, "serve", "--config", s.cfgPath, "--listen", "127.0.0.1:0", "--data-dir", s.dataDir)
	cmd.Stdout = &readyWatcher{ready: ready}
	cmd.Stderr = s.logs
	// If the test binary dies, its servers must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting server: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case addr := <-ready:
		s.mu.Lock()
		scheme := "http://"
		if s.Cfg.TLSCert != "" {
			scheme = "https://"
		}
		s.cmd, s.done, s.URL, s.PID = cmd, done, scheme+addr, cmd.Process.Pid
		s.mu.Unlock()
	case err := <-done:
		s.t.Fatalf("server exited before it was ready: %v\nstderr:\n%s", err, s.logs.String())
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		s.t.Fatalf("server not ready after 90s\nstderr:\n%s", s.logs.String())
	}
}

// Kill SIGKILLs the server, as a power cut or the OOM killer would.
func (s *server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("server pid %d still running 10s after SIGKILL", cmd.Process.Pid)
	}
}

// Stop sends SIGTERM and returns the exit error of a server that did not
// stop cleanly (or in time).
func (s *server) Stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(45 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("still running 45s after SIGTERM; killed")
	}
}

// Restart stops the server gracefully and starts it again on the same data.
func (s *server) Restart() {
	s.t.Helper()
	if err := s.Stop(); err != nil {
		s.t.Fatalf("graceful stop before restart: %v", err)
	}
	s.Start()
}

// Client is the HTTP client for this server's requests.
func (s *server) Client() *http.Client {
	if s.TLSClient != nil {
		return s.TLSClient
	}
	return httpClient
}

// CurrentURL is the base URL of the running server, "" while it is down;
// safe to call from other goroutines.
func (s *server) CurrentURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return ""
	}
	return s.URL
}

// procStatus reads a field of /proc/PID/status in kB (VmRSS, VmHWM).
func (s *server) procStatus(field string) (int64, error) {
	return procstat.KB(s.PID, field)
}

// readyWatcher is the child's stdout: it reports the address from the
// first "listening on ADDR" line.
type readyWatcher struct {
	mu    sync.Mutex
	buf   []byte
	ready chan string
	sent  bool
}

func (w *readyWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sent {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if addr, ok := strings.CutPrefix(line, "listening on "); ok {
			w.sent = true
			w.ready <- addr
			return len(p), nil
		}
	}
}

// logFailure logs the server's warnings and errors and the last lines of
// its stderr: short, so that CI's tail of the output still shows the
// test's own failure message above it. The whole tail goes to a file.
func (s *server) logFailure(t testing.TB) {
	all := s.logs.String()
	lines := strings.Split(strings.TrimRight(all, "\n"), "\n")
	var notable []string
	for _, l := range lines {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "panic") {
			notable = append(notable, l)
		}
	}
	f, err := os.CreateTemp("", "tributary-it-*.log")
	where := "not saved: " + fmt.Sprint(err)
	if err == nil {
		_, _ = f.WriteString(all)
		_ = f.Close()
		where = f.Name()
	}
	t.Logf("server pid %d: %d warnings/errors (last 30):\n%s\nlast 10 lines of stderr (all of its last %d bytes: %s):\n%s",
		s.PID, len(notable), strings.Join(notable[max(0, len(notable)-30):], "\n"), s.logs.max, where,
		strings.Join(lines[max(0, len(lines)-10):], "\n"))
}

// tailBuffer keeps the last max bytes written (the server's stderr across
// all its runs), for failure messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
