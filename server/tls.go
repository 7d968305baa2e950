package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// certCheckEvery bounds how often a handshake stats the certificate files:
// a renewed certificate (certbot, cert-manager) is served within this long
// of being written, without a restart or a signal.
const certCheckEvery = 5 * time.Second

// certReloader serves the key pair in certFile/keyFile and loads it again
// when either file's modification time or size changes. A pair that fails
// to load (a renewal caught half-written) keeps the previous certificate
// in service and is retried at the next check.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	now               func() time.Time
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   fileStamp // of the pair now served
	checked time.Time
}

// fileStamp identifies a version of the two files.
type fileStamp struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

func newCertReloader(certFile, keyFile string, every time.Duration, now func() time.Time, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, every: every, now: now, log: log}
	st, err := r.statFiles()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls_cert_file %s / tls_key_file %s: %w", certFile, keyFile, err)
	}
	r.cert, r.stamp, r.checked = &cert, st, now()
	return r, nil
}

func (r *certReloader) statFiles() (fileStamp, error) {
	c, err := os.Stat(r.certFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tls_cert_file: %w", err)
	}
	k, err := os.Stat(r.keyFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("tls_key_file: %w", err)
	}
	return fileStamp{certMod: c.ModTime(), keyMod: k.ModTime(), certSize: c.Size(), keySize: k.Size()}, nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.now(); now.Sub(r.checked) >= r.every {
		r.checked = now
		r.reloadLocked()
	}
	return r.cert, nil
}

func (r *certReloader) reloadLocked() {
	st, err := r.statFiles()
	if err != nil {
		r.log.Warn("TLS certificate files unreadable; serving the previous certificate", "err", err)
		return
	}
	if st == r.stamp {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Not remembered as loaded: the next check tries again, so the
		// second half of a renewal (key after certificate) is picked up.
		r.log.Warn("TLS certificate changed but does not load; serving the previous certificate",
			"cert_file", r.certFile, "key_file", r.keyFile, "err", err)
		return
	}
	r.cert, r.stamp = &cert, st
	var notAfter time.Time
	if cert.Leaf != nil { // parsed by LoadX509KeyPair unless GODEBUG=x509keypairleaf=0
		notAfter = cert.Leaf.NotAfter
	}
	r.log.Info("TLS certificate reloaded", "cert_file", r.certFile, "not_after", notAfter)
}

// tlsConfig is TLS 1.2 and later; for 1.2 only forward-secret AEAD suites
// (TLS 1.3's suites are not configurable and all modern). HTTP/2 is
// negotiated by http.Server.ServeTLS, which adds "h2" to NextProtos.
func tlsConfig(r *certReloader) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
	}
}

// redirectHandler answers every plain-HTTP request with a 308 to the same
// host, path and query over https on httpsPort (omitted when 443). 308,
// not 301, so that a client that follows it repeats a POST with its body.
func redirectHandler(httpsPort string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" {
			http.Error(w, "Host header required", http.StatusBadRequest)
			return
		}
		if httpsPort != "443" {
			host = net.JoinHostPort(host, httpsPort)
		} else if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
			host = "[" + host + "]"
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// serveRedirect runs the plain-HTTP redirect listener until closed; its
// error (other than a close) goes to errc.
func serveRedirect(addr, httpsPort string, errLog *slog.Logger, errc chan<- error) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen %s (redirect_http_listen): %w", addr, err)
	}
	rs := &http.Server{Handler: redirectHandler(httpsPort), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, ErrorLog: slog.NewLogLogger(errLog.Handler(), slog.LevelWarn)}
	go func() {
		if err := rs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("redirect listener: %w", err)
		}
	}()
	return rs, ln.Addr(), nil
}
