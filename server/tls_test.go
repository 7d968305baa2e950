package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a fresh self-signed certificate for cn and its key,
// stamping both files with mod (file systems with coarse timestamps would
// otherwise hide a rewrite within the same second).
func writePair(t *testing.T, certFile, keyFile, cn string, mod time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{certFile, "CERTIFICATE", der}, {keyFile, "PRIVATE KEY", kder}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
}

func servedCN(t *testing.T, r *certReloader) string {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.Subject.CommonName
}

// The served certificate follows the files, checked at most every
// interval; a pair that does not load leaves the previous one in service
// until a later check finds a good pair.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	base := time.Now().Add(-time.Hour)
	writePair(t, certFile, keyFile, "first.test", base)
	clock := base
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := newCertReloader(certFile, keyFile, 5*time.Second, func() time.Time { return clock }, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := servedCN(t, r); got != "first.test" {
		t.Fatalf("served %q", got)
	}

	writePair(t, certFile, keyFile, "second.test", base.Add(time.Minute))
	clock = clock.Add(4 * time.Second)
	if got := servedCN(t, r); got != "first.test" {
		t.Fatalf("checked before the interval: served %q", got)
	}
	clock = clock.Add(time.Second)
	if got := servedCN(t, r); got != "second.test" {
		t.Fatalf("after the interval: served %q, want the rewritten pair", got)
	}

	// A renewal caught half-way (new certificate, old key) keeps serving
	// the previous pair; once the key follows, the new pair is served.
	stash := filepath.Join(dir, "stash")
	if err := os.Mkdir(stash, 0o700); err != nil {
		t.Fatal(err)
	}
	writePair(t, filepath.Join(stash, "cert.pem"), filepath.Join(stash, "key.pem"), "third.test", base.Add(2*time.Minute))
	if err := os.Rename(filepath.Join(stash, "cert.pem"), certFile); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(10 * time.Second)
	if got := servedCN(t, r); got != "second.test" {
		t.Fatalf("mismatched pair: served %q, want the previous certificate", got)
	}
	if err := os.Rename(filepath.Join(stash, "key.pem"), keyFile); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(10 * time.Second)
	if got := servedCN(t, r); got != "third.test" {
		t.Fatalf("completed renewal: served %q", got)
	}

	// A missing file at start is an error naming the key.
	if _, err := newCertReloader(filepath.Join(dir, "nope.pem"), keyFile, time.Second, time.Now, log); err == nil ||
		!strings.Contains(err.Error(), "tls_cert_file") || !strings.Contains(err.Error(), "nope.pem") {
		t.Fatalf("missing file: %v", err)
	}
	// So is a key that does not belong to the certificate.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	writePair(t, filepath.Join(other, "cert.pem"), filepath.Join(other, "key.pem"), "other.test", base)
	if _, err := newCertReloader(certFile, filepath.Join(other, "key.pem"), time.Second, time.Now, log); err == nil ||
		!strings.Contains(err.Error(), "tls_cert_file") || !strings.Contains(err.Error(), "tls_key_file") {
		t.Fatalf("mismatched pair: %v", err)
	}
}

// The config refuses TLS 1.1 and CBC suites and offers HTTP/2.
func TestTLSConfigModernOnly(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePair(t, certFile, keyFile, "example.test", time.Now())
	r, err := newCertReloader(certFile, keyFile, time.Second, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// The real path: http.Server.ServeTLS with only GetCertificate.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{TLSConfig: tlsConfig(r), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	})}
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	defer hs.Close()

	dial := func(cfg *tls.Config) error {
		cfg.InsecureSkipVerify = true // only the protocol is under test here
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err == nil {
			_ = c.Close()
		}
		return err
	}
	cases := []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"tls1.3", &tls.Config{MinVersion: tls.VersionTLS13}, true},
		{"tls1.2 gcm", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
		{"tls1.1", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false},
		{"tls1.2 cbc", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := dial(tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("handshake error %v, want success=%v", err, tc.ok)
			}
		})
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	resp, err := c.Get("https://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "HTTP/2.0" {
		t.Fatalf("protocol %q, want HTTP/2.0", body)
	}
}

func TestRedirectHandler(t *testing.T) {
	cases := []struct{ port, host, target, want string }{
		{"8443", "example.com:8080", "/track/?ip=1&data=x", "https://example.com:8443/track/?ip=1&data=x"},
		{"443", "example.com", "/import", "https://example.com/import"},
		{"443", "[::1]:80", "/", "https://[::1]/"},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, tc.target, nil)
		req.Host = tc.host
		redirectHandler(tc.port).ServeHTTP(rec, req)
		if rec.Code != http.StatusPermanentRedirect || rec.Header().Get("Location") != tc.want {
			t.Errorf("%s%s: %d %q, want 308 %q", tc.host, tc.target, rec.Code, rec.Header().Get("Location"), tc.want)
		}
	}
}
