package integration

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The compatibility suite (clients_*_test.go) drives the official client
// packages pinned in clients/package-lock.json (installed by `npm ci` in
// integration/clients, as .ci/run does) and Debian's chromium against a
// real server, then reads every result back through export and engage.

// clientsDir holds the node scripts and node_modules.
const clientsDir = "clients"

// needTool fails under CI=true (where .ci/run installs everything, so a
// missing piece is a broken setup) and skips loudly elsewhere.
func needTool(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("compat suite: %s is missing (CI=true: .ci/run must install it)", what)
	}
	t.Skipf("SKIPPED compat suite: %s is missing; run `cd integration/clients && npm ci` and install Debian's chromium", what)
}

// needNode checks node and the pinned npm packages the test uses.
func needNode(t *testing.T, packages ...string) {
	t.Helper()
	_, err := exec.LookPath("node")
	needTool(t, err == nil, "node (Node.js 20+)")
	for _, p := range packages {
		_, err := os.Stat(filepath.Join(clientsDir, "node_modules", p, "package.json"))
		needTool(t, err == nil, "npm package "+p+" (integration/clients/node_modules)")
	}
}

// testCA is a certificate authority made for one test and a server
// certificate it signed for 127.0.0.1 and localhost, as PEM files.
type testCA struct {
	CAFile, CertFile, KeyFile string
	Pool                      *x509.CertPool
	ca                        *x509.Certificate
	caKey                     *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Tributary test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCA{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool(), ca: ca, caKey: key}
	c.Pool.AddCert(ca)
	writePEM(t, c.CAFile, "CERTIFICATE", der)
	c.Issue(t, "tributary-test-1", time.Now())
	return c
}

// Issue writes a new server certificate (common name cn) and key over
// CertFile and KeyFile, both stamped mod.
func (c *testCA) Issue(t *testing.T, cn string, mod time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, c.KeyFile, "PRIVATE KEY", kder)
	writePEM(t, c.CertFile, "CERTIFICATE", der)
	for _, f := range []string{c.KeyFile, c.CertFile} {
		if err := os.Chtimes(f, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Client trusts only the test CA (no system roots) and speaks HTTP/2.
func (c *testCA) Client() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: c.Pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
}

// startTLSServer starts a server serving HTTPS with a certificate of a new
// test CA; its requests (s.do, s.export) trust that CA.
func startTLSServer(t *testing.T, cfg serverConfig) (*server, *testCA) {
	t.Helper()
	ca := newTestCA(t)
	cfg.TLSCert, cfg.TLSKey = ca.CertFile, ca.KeyFile
	s := startServer(t, cfg)
	s.TLSClient = ca.Client()
	return s, ca
}

// runNode runs a script of integration/clients with env added to the
// test's environment and returns its stdout, which every script ends with
// one JSON line: the outcome of each client call. The script's stderr is
// logged on failure.
func runNode(t *testing.T, timeout time.Duration, script string, env map[string]string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = clientsDir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstderr:\n%s\nstdout:\n%s", script, err, tail(stderr.String(), 4000), tail(stdout.String(), 4000))
	}
	if testing.Verbose() && stderr.Len() > 0 {
		t.Logf("node %s stderr:\n%s", script, tail(stderr.String(), 4000))
	}
	return stdout.Bytes()
}

// callResults decodes the last stdout line of a script: call name → the
// error the client reported ("" when it reported success).
func callResults(t *testing.T, out []byte) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res map[string]string
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("script output's last line is not the results object: %v\n%s", err, tail(string(out), 4000))
	}
	return res
}

// wantCallsOK fails for every call the client reported as failed, and for
// every expected call the script did not report.
func wantCallsOK(t *testing.T, res map[string]string, calls ...string) {
	t.Helper()
	for _, c := range calls {
		msg, ok := res[c]
		switch {
		case !ok:
			t.Errorf("%s: the script reported no outcome", c)
		case msg != "":
			t.Errorf("%s: the client reported failure: %s", c, msg)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
