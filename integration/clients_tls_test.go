package integration

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTLSServe: with tls_cert_file/tls_key_file the listener speaks HTTPS
// (HTTP/2 negotiated, TLS 1.2+ only), a rewritten certificate is served
// without a restart, redirect_http_listen answers plain HTTP with a 308 to
// the same URL over https, and migrate_listen speaks HTTPS too.
func TestTLSServe(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Redirect = "127.0.0.1:0"
	cfg.MigrateOn = "127.0.0.1:0"
	s, ca := startTLSServer(t, cfg)
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("server URL %s", s.URL)
	}
	addr := strings.TrimPrefix(s.URL, "https://")

	// Ingest and read back over HTTP/2 with only the test CA trusted.
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), events("tls", 3)), 3)
	rep := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(mainID, nil), Auth: asOwner})
	if rep.Status != 200 || len(parseExport(t, rep.Body)) != 3 {
		t.Fatalf("export over TLS: %s", rep)
	}
	resp, err := s.Client().Get(s.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", resp.Proto)
	}

	// Old protocol versions and plain HTTP on the TLS port are refused.
	if c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		_ = c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if resp, err := httpClient.Get("http://" + addr + "/healthz"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port: %s", resp.Status)
		}
	}

	// The redirect listener's address is in the log (it was bound to port 0).
	m := regexp.MustCompile(`msg="redirecting plain HTTP to https" addr=(\S+)`).FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatal("no redirect listener in the log")
	}
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, redirPort, _ := net.SplitHostPort(m[1])
	resp, err = noFollow.Post("http://localhost:"+redirPort+"/track/?ip=1", "application/x-www-form-urlencoded", strings.NewReader("data=e30="))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	_, tlsPort, _ := net.SplitHostPort(addr)
	if want := "https://localhost:" + tlsPort + "/track/?ip=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("redirect: %s Location %q, want 308 %q", resp.Status, resp.Header.Get("Location"), want)
	}

	// The migration service's own listener: HTTPS with the same
	// certificate (its requests carry the source's API secret), never plain.
	m = regexp.MustCompile(`msg="migration service listening" addr=(\S+) scheme=https`).FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatal("no HTTPS migration listener in the log")
	}
	resp, err = s.Client().Get("https://" + m[1] + "/amplitude/no-such-job")
	if err != nil {
		t.Fatalf("migration listener over TLS: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("migration status without credentials over TLS: %s, want 401", resp.Status)
	}
	if resp, err := httpClient.Get("http://" + m[1] + "/amplitude/no-such-job"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the migration listener: %s", resp.Status)
		}
	}

	// A renewed certificate is served within the check interval (5 s),
	// on new connections, without a restart.
	served := func() string {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "tributary-test-1" {
		t.Fatalf("served %q", got)
	}
	ca.Issue(t, "tributary-test-2", time.Now().Add(time.Minute))
	deadline := time.Now().Add(15 * time.Second)
	for served() != "tributary-test-2" {
		if time.Now().After(deadline) {
			t.Fatal("the rewritten certificate was not served within 15s")
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The log line travels through the child's stderr pipe: allow it a moment.
	for i := 0; !strings.Contains(s.logs.String(), "TLS certificate reloaded"); i++ {
		if i == 40 {
			t.Error("the reload was not logged")
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err = ca.Client().Get(s.URL + "/healthz")
	if err != nil {
		t.Fatalf("request after the reload: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}
