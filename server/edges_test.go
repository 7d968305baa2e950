package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/metrics"
)

// serve runs h on a loopback listener (wrapped by wrap, when not nil) and
// returns its address.
func serve(t *testing.T, h http.Handler, wrap func(net.Listener) net.Listener, connState func(net.Conn, http.ConnState)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ConnState: connState}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return addr
}

// rawRequest writes a POST's headers, then the body in pieces of chunk
// bytes every gap, and returns the status line (or the read error) and
// how long the exchange took.
func rawRequest(t *testing.T, addr string, size, chunk int, gap time.Duration) (string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /import HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size)
	go func() {
		piece := strings.Repeat("x", chunk)
		for sent := 0; sent < size; sent += chunk {
			if _, err := io.WriteString(c, piece[:min(chunk, size-sent)]); err != nil {
				return // the server cut us off
			}
			time.Sleep(gap)
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "read: " + err.Error(), time.Since(start)
	}
	return strings.TrimSpace(line), time.Since(start)
}

func TestPaceBodies(t *testing.T) {
	read := make(chan error, 10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	const rate, grace = 2000, 300 * time.Millisecond // bytes/s
	addr := serve(t, paceBodies(h, rate, grace), nil, nil)
	cases := []struct {
		name       string
		size       int
		chunk      int
		gap        time.Duration
		wantStatus string
		wantErr    string
		within     time.Duration
	}{
		// 1 byte every 100 ms is 10 B/s: cut soon after the grace.
		{"trickle", 1000, 1, 100 * time.Millisecond, "HTTP/1.1 400", "slower than 2000 bytes a second", 2 * time.Second},
		// 12 KB at ~20 KB/s: ten times the minimum, accepted.
		{"slow but steady", 12000, 1000, 50 * time.Millisecond, "HTTP/1.1 204", "", 5 * time.Second},
		// A fast body is unaffected.
		{"fast", 200000, 50000, 0, "HTTP/1.1 204", "", 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, took := rawRequest(t, addr, tc.size, tc.chunk, tc.gap)
			if !strings.HasPrefix(status, tc.wantStatus) {
				t.Fatalf("status %q, want %q", status, tc.wantStatus)
			}
			if took > tc.within {
				t.Fatalf("took %v, want within %v", took, tc.within)
			}
			err := <-read
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("handler read error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A handler that answers without reading the body leaves net/http to
// discard what is left: that read is bounded too, so a trickling client
// cannot hold the connection past the rule.
func TestPaceBodiesUnreadBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	addr := serve(t, paceBodies(h, 100_000, 200*time.Millisecond), nil, nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /track HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nx")
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	// The 401 arrives; then the connection must close (EOF) well before
	// the client's read deadline, although it never sends the rest.
	b, err := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 401") {
		t.Fatalf("got %q", b)
	}
	if err != nil || time.Since(start) > 5*time.Second {
		t.Fatalf("connection still open after %v (err %v): a trickling body held it", time.Since(start), err)
	}
}

func TestLimitTokenEndpoints(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	reg := metrics.New()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	h := limitTokenEndpoints(ok, 1, func() time.Time { return now }, reg) // burst 2
	do := func(method, path, remote string) *http.Response {
		r, _ := http.NewRequest(method, "http://x"+path, nil)
		r.RemoteAddr = remote
		w := &recorder{header: http.Header{}}
		h.ServeHTTP(w, r)
		return &http.Response{StatusCode: w.code, Header: w.header, Body: io.NopCloser(strings.NewReader(w.body.String()))}
	}
	steps := []struct {
		method, path, remote string
		want                 int
	}{
		{"POST", "/track", "192.0.2.1:1000", 200},
		{"POST", "/track/", "192.0.2.1:1001", 200}, // another port, same address
		{"POST", "/engage", "192.0.2.1:1002", 429}, // the three endpoints share the address's budget
		{"OPTIONS", "/track", "192.0.2.1:1003", 200},
		{"POST", "/import", "192.0.2.1:1004", 200}, // authenticated routes are not counted
		{"POST", "/groups", "192.0.2.2:1000", 200}, // another address
		{"GET", "/track", "[2001:db8::1]:1", 200},
		{"GET", "/track", "[2001:db8::2]:1", 200},
		{"GET", "/track", "[2001:db8::3]:1", 429}, // one /64
	}
	for i, s := range steps {
		resp := do(s.method, s.path, s.remote)
		if resp.StatusCode != s.want {
			t.Fatalf("step %d %s %s from %s: %d, want %d", i, s.method, s.path, s.remote, resp.StatusCode, s.want)
		}
		if s.want == 429 {
			body, _ := io.ReadAll(resp.Body)
			if resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"status":"error"`) {
				t.Fatalf("429 without Retry-After 1 or /track's error shape: %v %s", resp.Header, body)
			}
		}
	}
	now = now.Add(time.Second)
	if resp := do("POST", "/track", "192.0.2.1:1005"); resp.StatusCode != 200 {
		t.Fatalf("a second later: %d, want 200", resp.StatusCode)
	}
	if got := reg.Counter("tributary_http_throttled_total", "", "route").Value("engage"); got != 1 {
		t.Fatalf("throttled{route=engage} = %d, want 1", got)
	}
}

type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(c int)   { r.code = c }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}

// Connections over the cap wait in the accept queue: the third client is
// answered only once one of the first two closes.
func TestConnectionCap(t *testing.T) {
	reg := metrics.New()
	e := newEdge(2, reg, slog.New(slog.DiscardHandler))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	addr := serve(t, h, e.listener, e.connState)
	get := func(c net.Conn) (string, error) {
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		return bufio.NewReader(c).ReadString('\n')
	}
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr) // the kernel completes the handshake
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i := range 2 {
		if line, err := get(conns[i]); err != nil || !strings.HasPrefix(line, "HTTP/1.1 204") {
			t.Fatalf("connection %d: %q %v", i, line, err)
		}
	}
	if line, err := get(conns[2]); err == nil {
		t.Fatalf("third connection answered %q while two are open; the cap is 2", line)
	}
	if n := e.open.Load(); n != 2 {
		t.Fatalf("open connections %d, want 2", n)
	}
	conns[0].Close()
	_ = conns[2].SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conns[2]).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 204") {
		t.Fatalf("third connection after one closed: %q %v", line, err)
	}
}

func TestDefaultMaxConnections(t *testing.T) {
	n := defaultMaxConnections()
	lim, ok := openFileLimit()
	if n > maxConnectionsCeiling || n < 16 || ok && uint64(n) > max(lim/2, 16) {
		t.Fatalf("default max_connections %d with an open-file limit of %d", n, lim)
	}
}
