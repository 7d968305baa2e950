package amplitude

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// Amplitude's Export API hosts (public-interface-facts §5.3).
// analytics.amplitude.com is the web UI, not the API.
const (
	DefaultBaseURL = "https://amplitude.com"
	EUBaseURL      = "https://analytics.eu.amplitude.com"
)

// hourLayout is the Export API's start/end format; both ends are inclusive.
const hourLayout = "20060102T15"

// Outcomes of one export request. ErrTooLarge and ErrUnavailable make Walk
// split the range; the others end it.
var (
	ErrNoData       = errors.New("amplitude export: no data in the range")
	ErrTooLarge     = errors.New("amplitude export: the range is over Amplitude's 4 GB export limit")
	ErrUnauthorized = errors.New("amplitude export: Amplitude refused the API key and secret")
	ErrUnavailable  = errors.New("amplitude export: Amplitude did not answer")
)

// Backoff says how often and how patiently one range is retried after a
// 429, a 5xx or a broken connection.
type Backoff struct {
	Initial  time.Duration // first wait; default 1s
	Max      time.Duration // longest wait, also the cap on Retry-After; default 30s
	Attempts int           // tries per range; default 5
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = time.Second
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	if b.Attempts <= 0 {
		b.Attempts = 5
	}
	return b
}

// wait is the pause before retry n (1-based): exponential, capped, with
// jitter in [d/2, d] so that many clients do not retry in step.
func (b Backoff) wait(n int, retryAfter time.Duration) time.Duration {
	d := b.Initial << min(n-1, 20)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	d = d/2 + rand.N(d/2+1)
	if retryAfter > d {
		d = min(retryAfter, b.Max)
	}
	return d
}

// Client downloads exports. Its zero value is not usable: set BaseURL and
// Credentials. The credentials travel only in the Authorization header;
// no error or log line ever contains them.
type Client struct {
	BaseURL     string
	HTTP        *http.Client // nil: a client with a 30-minute timeout
	Credentials Credentials
	Backoff     Backoff
	TempDir     string // where downloads are spilled; "": os.TempDir()
	Log         *slog.Logger
}

// retryable is a failure that another attempt may not repeat.
type retryable struct {
	err    error
	after  time.Duration // Retry-After, when the server sent one
	detail error         // for the log: err with the URL and addresses, when err leaves them out
}

func (r *retryable) Error() string { return r.err.Error() }
func (r *retryable) Unwrap() error { return r.err }

// Export downloads the events uploaded in the hours [start, end] (UTC,
// inclusive). It retries 429, 5xx and transport failures per Backoff and
// then fails with ErrUnavailable; a 404 is ErrNoData, a 400 ErrTooLarge.
// The caller closes the Archive.
func (c *Client) Export(ctx context.Context, start, end time.Time) (*Archive, error) {
	b := c.Backoff.withDefaults()
	var last error
	for attempt := 1; ; attempt++ {
		a, err := c.once(ctx, start, end)
		rerr, ok := errors.AsType[*retryable](err)
		if !ok {
			return a, err
		}
		last = rerr.err
		if attempt >= b.Attempts {
			break
		}
		d := b.wait(attempt, rerr.after)
		detail := last
		if rerr.detail != nil {
			detail = rerr.detail
		}
		c.log().Warn("amplitude export failed; retrying", "start", start.Format(hourLayout), "end", end.Format(hourLayout),
			"attempt", attempt, "wait", d, "err", detail)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("%w: %s–%s after %d attempts: %w", ErrUnavailable,
		start.Format(hourLayout), end.Format(hourLayout), b.Attempts, last)
}

// once makes one request and classifies its answer.
func (c *Client) once(ctx context.Context, start, end time.Time) (*Archive, error) {
	u, err := url.Parse(strings.TrimRight(c.BaseURL, "/") + "/api/2/export")
	if err != nil {
		return nil, fmt.Errorf("amplitude export: base URL: %w", err)
	}
	u.RawQuery = url.Values{"start": {start.UTC().Format(hourLayout)}, "end": {end.UTC().Format(hourLayout)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("amplitude export: %w", err)
	}
	req.SetBasicAuth(c.Credentials.APIKey, c.Credentials.APISecret)
	began := time.Now()
	resp, err := c.httpClient().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The client sees this error (a 502, a failed job): say what went
		// wrong, not where. The URL may be an internal proxy's
		// (TRIBUTARY_AMPLITUDE_URL); the log keeps it.
		return nil, &retryable{err: fmt.Errorf("amplitude export: %s", transportReason(err)), detail: err}
	}
	defer resp.Body.Close()
	switch s := resp.StatusCode; {
	case s == http.StatusOK:
		a, err := c.spill(ctx, resp)
		c.log().Debug("amplitude export downloaded", "start", start.Format(hourLayout), "end", end.Format(hourLayout),
			"bytes", a.Size(), "duration", time.Since(began), "err", err)
		return a, err
	case s == http.StatusNotFound:
		return nil, ErrNoData
	case s == http.StatusBadRequest:
		return nil, fmt.Errorf("%w (HTTP 400: %s)", ErrTooLarge, snippet(resp.Body))
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		return nil, fmt.Errorf("%w (HTTP %d)", ErrUnauthorized, s)
	case s == http.StatusTooManyRequests, s >= 500:
		return nil, &retryable{
			err:   fmt.Errorf("amplitude export: HTTP %d: %s", s, snippet(resp.Body)),
			after: retryAfter(resp.Header.Get("Retry-After")),
		}
	default:
		return nil, fmt.Errorf("amplitude export: unexpected HTTP %d: %s", s, snippet(resp.Body))
	}
}

// spill copies the body to a temporary file: zip reads its directory from
// the end, so the archive cannot be streamed from the socket.
func (c *Client) spill(ctx context.Context, resp *http.Response) (*Archive, error) {
	f, err := os.CreateTemp(c.TempDir, "amplitude-export-*.zip")
	if err != nil {
		return nil, fmt.Errorf("amplitude export: spill: %w", err)
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
	}
	if err != nil {
		closeRemove(f)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &retryable{err: fmt.Errorf("amplitude export: download cut short: %w", err)}
	}
	a, err := openArchive(f)
	if errors.Is(err, ErrCorrupt) { // most likely a cut download: fetch again
		return nil, &retryable{err: err}
	}
	return a, err
}

// Walk exports [start, end] and calls fn for each range it fetched, in
// order, with nil for a range without data. A range Amplitude refuses as
// too large, or that stays unavailable after retries, is split in two
// halves, down to single hours; a single hour that still fails ends the walk.
// The archive is closed when fn returns.
func (c *Client) Walk(ctx context.Context, start, end time.Time, fn func(start, end time.Time, a *Archive) error) error {
	return c.walk(ctx, start, end, nil, fn)
}

// export is one Export's outcome, for a range fetched ahead of its turn.
type export struct {
	a   *Archive
	err error
}

// prefetch starts exporting [start, end] in the background. The result
// arrives on the channel; whoever takes it closes the archive.
func (c *Client) prefetch(ctx context.Context, start, end time.Time) <-chan export {
	ch := make(chan export, 1)
	go func() {
		a, err := c.Export(ctx, start, end)
		ch <- export{a, err}
	}()
	return ch
}

// walk is Walk; first, when not nil, is the outcome of exporting [start,
// end] already (prefetch), used instead of asking again.
func (c *Client) walk(ctx context.Context, start, end time.Time, first *export, fn func(start, end time.Time, a *Archive) error) error {
	var a *Archive
	var err error
	if first != nil {
		a, err = first.a, first.err
	} else {
		a, err = c.Export(ctx, start, end)
	}
	switch {
	case err == nil:
		defer a.Close()
		return fn(start, end, a)
	case errors.Is(err, ErrNoData):
		return fn(start, end, nil)
	case (errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnavailable)) && end.After(start):
		n := hoursIn(start, end)
		mid := start.Add(time.Duration(n/2-1) * time.Hour)
		c.log().Info("amplitude export: splitting the range", "start", start.Format(hourLayout), "end", end.Format(hourLayout), "reason", err)
		if err := c.Walk(ctx, start, mid, fn); err != nil {
			return err
		}
		return c.Walk(ctx, mid.Add(time.Hour), end, fn)
	}
	return err
}

// hoursIn counts the hours of an inclusive range.
func hoursIn(start, end time.Time) int { return int(end.Sub(start)/time.Hour) + 1 }

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	// An hour of a busy project is gigabytes: the timeout bounds a stalled
	// transfer, not a slow one.
	return &http.Client{Timeout: 30 * time.Minute}
}

func (c *Client) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// transportReason says why a request got no answer, without the URL or
// the addresses a *url.Error or *net.OpError carries.
func transportReason(err error) string {
	var (
		ne   net.Error
		dns  *net.DNSError
		cert *tls.CertificateVerificationError
		rec  tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "Amplitude's Export API refused the connection"
	case errors.As(err, &dns):
		return "the Export API's host name could not be resolved"
	case errors.As(err, &ne) && ne.Timeout():
		return "the request to Amplitude's Export API timed out"
	case errors.As(err, &cert), errors.As(err, &rec):
		return "the TLS handshake with Amplitude's Export API failed"
	}
	return "the connection to Amplitude's Export API failed"
}

// urlPattern finds URLs in text that reaches clients: an upstream error
// page (a proxy's, say) may name hosts the client has no business seeing.
var urlPattern = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]+`)

// scrubURLs replaces every URL in s with "<url>".
func scrubURLs(s string) string { return urlPattern.ReplaceAllString(s, "<url>") }

// snippet returns the start of an error body, printable and without
// URLs, for messages.
func snippet(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 300))
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, string(b))
	if s = strings.TrimSpace(s); s == "" {
		return "no message"
	}
	return scrubURLs(s)
}

// retryAfter reads a Retry-After header given in seconds (the HTTP-date
// form is rare on APIs and ignored).
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}
