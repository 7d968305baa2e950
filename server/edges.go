package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/tributary-dev/tributary/ingest/ratelimit"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// The HTTP edge: what keeps clients that send slowly, or many at once,
// from holding the process's file descriptors and goroutines. Each piece
// is a wrapper (a listener or a handler) so that it composes with
// whatever else the listener or the handler chain grows (TLS, routes).

// bodyGrace is how long a request body may take before the minimum rate
// applies, as the headers get ReadHeaderTimeout: a client on a slow link
// can start sending a large /import without being measured at once.
const bodyGrace = 10 * time.Second

// maxConnectionsCeiling caps the default of max_connections: enough for
// thousands of browsers holding keep-alive connections, far below the
// descriptors a loaded process also needs (store files, Postgres pool,
// warehouse sources).
const maxConnectionsCeiling = 10_000

// defaultMaxConnections is half the open-file limit (Go raises the soft
// limit to the hard one at start on Linux), at most maxConnectionsCeiling.
func defaultMaxConnections() int {
	n := maxConnectionsCeiling
	if lim, ok := openFileLimit(); ok && lim/2 < uint64(n) {
		n = max(int(lim/2), config.MinMaxConnections)
	}
	return n
}

// edge is the connection cap of one listener and its gauges.
type edge struct {
	max  int
	open atomic.Int64
	log  *slog.Logger

	mu     sync.Mutex
	warned time.Time // last "cap reached" warning
}

// newEdge registers the open-connection gauges once per process.
func newEdge(maxConns int, reg *metrics.Registry, log *slog.Logger) *edge {
	e := &edge{max: maxConns, log: log}
	reg.Gauge("tributary_http_connections_open", "Client connections open now (all listeners).",
		func() float64 { return float64(e.open.Load()) })
	reg.Gauge("tributary_http_connections_max", "The cap on open client connections per listener (max_connections); more wait in the kernel's accept queue.",
		func() float64 { return float64(e.max) })
	return e
}

// listener caps ln at max open connections. A connection over the cap is
// not refused: it waits in the kernel's accept queue, costing no
// descriptor of ours, until one closes.
func (e *edge) listener(ln net.Listener) net.Listener { return netutil.LimitListener(ln, e.max) }

// connState, as http.Server.ConnState, counts open connections and warns
// (at most once a minute) when a listener reaches the cap.
func (e *edge) connState(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if n := e.open.Add(1); n >= int64(e.max) {
			e.mu.Lock()
			warn := time.Since(e.warned) > time.Minute
			if warn {
				e.warned = time.Now()
			}
			e.mu.Unlock()
			if warn {
				e.log.Warn("max_connections reached: new connections wait until others close", "open", n, "max_connections", e.max)
			}
		}
	case http.StateClosed, http.StateHijacked:
		e.open.Add(-1)
	}
}

// paceBodies enforces body_min_rate: after grace (bodyGrace) from its
// first byte read, a request body must have arrived at an average of at least
// minRate bytes a second, else reading it fails and the connection is
// closed. The clock starts at the first read, not at the request, so a
// handler that waits before reading (a lookup upload waiting for memory)
// is not charged for its own wait. A 10 MB body at the default 1 KB/s
// has almost three hours; a client trickling a byte every two seconds is
// cut after ten.
func paceBodies(h http.Handler, minRate int64, grace time.Duration) http.Handler {
	if minRate <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		body := &pacedBody{ReadCloser: r.Body, rc: rc, rate: minRate, grace: grace}
		// A shallow copy: net/http keeps judging the original body (how
		// much is left unread) after the handler.
		r2 := *r
		r2.Body = body
		h.ServeHTTP(w, &r2)
		if body.start.IsZero() {
			// net/http reads up to 256 KB a handler left unread, to keep
			// the connection: a body never read gets the grace for it. One
			// read in part keeps the deadline its last read set.
			_ = rc.SetReadDeadline(time.Now().Add(grace))
		}
	})
}

func rateTime(n, rate int64) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}

// pacedBody moves the connection's read deadline along with the bytes
// that arrived: start + grace + read/rate.
type pacedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	rate  int64
	grace time.Duration
	start time.Time
	n     int64
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	deadline := p.start.Add(p.grace + rateTime(p.n, p.rate))
	if err := p.rc.SetReadDeadline(deadline); err != nil {
		return p.ReadCloser.Read(b) // a transport without deadlines: unpaced
	}
	n, err := p.ReadCloser.Read(b)
	p.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Not the net error itself: its socket addresses say nothing useful.
		err = fmt.Errorf("the request body arrived slower than %d bytes a second (body_min_rate) after %s: %w",
			p.rate, p.grace, os.ErrDeadlineExceeded)
	}
	return n, err
}

// tokenRoute names the routes a project's public token opens, which
// anyone may call: the per-address limit applies to them.
func tokenRoute(path string) (string, bool) {
	switch p := strings.TrimSuffix(path, "/"); p {
	case "/track", "/engage", "/groups":
		return p[1:], true
	}
	return "", false
}

// limitTokenEndpoints refuses with 429 the requests of a client address
// over its rate on /track, /engage and /groups. The per-project byte
// budget cannot apply before a request is read and its token checked;
// this bounds what one address costs before that. Addresses are the
// peer's (X-Forwarded-For is not trusted); IPv6 ones count per /64, the
// block one subscriber usually holds. Behind a reverse proxy every
// client shares the proxy's address: raise or turn off the limit there.
func limitTokenEndpoints(h http.Handler, perSecond int, now func() time.Time, reg *metrics.Registry) http.Handler {
	if perSecond <= 0 {
		return h
	}
	lim := ratelimit.NewKeyed[netip.Addr](ratelimit.PerSecond(perSecond), now, 0)
	throttled := reg.Counter("tributary_http_throttled_total",
		"Requests refused with 429 by a per-address or per-client request limit, by route.", "route")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, ok := tokenRoute(r.URL.Path)
		if !ok || r.Method == http.MethodOptions { // a CORS preflight carries no body
			h.ServeHTTP(w, r)
			return
		}
		if allowed, wait := lim.Allow(ratelimit.ClientAddr(r.RemoteAddr)); !allowed {
			throttled.Add(1, route)
			secs := max(int((wait+time.Second-1)/time.Second), 1)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			// The shape of /track's other errors.
			fmt.Fprintf(w, `{"error":"too many requests from this address (ip_requests_per_second is %d); retry after %d s","status":"error"}`+"\n",
				perSecond, secs)
			return
		}
		h.ServeHTTP(w, r)
	})
}
