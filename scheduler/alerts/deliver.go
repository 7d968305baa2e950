package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
)

// Outbox is what delivery needs of the store.
type Outbox interface {
	ClaimAlerts(ctx context.Context, owner string, nowMs, leaseUntilMs int64, limit int) ([]store.Alert, error)
	SettleAlert(ctx context.Context, s store.AlertSettle) error
	AlertCounts(ctx context.Context) (map[int64]map[string]int64, error)
	PruneAlerts(ctx context.Context, beforeMs int64) error
}

// Deliverer hands the outbox's alerts to their destinations. Each alert
// is leased to one process (Outbox.ClaimAlerts) for the attempt, sent
// with its id as the Idempotency-Key header, and settled: sent, retried
// later with exponential backoff, or dead after the project's
// retry.attempts. A delivery that succeeded but whose settle was lost (a
// crash in between) is sent again with the same key: receivers that keep
// the keys they saw see each alert once.
type Deliverer struct {
	outbox   Outbox
	projects map[int64]*config.Project
	owner    string
	log      *slog.Logger
	now      func() time.Time
	client   *http.Client
	// Poll is how often the outbox is looked at (the worker also wakes
	// at once on Wake).
	poll time.Duration
	wake chan struct{}
	// lease is how long a claim holds: the longest destination timeout
	// plus time to settle.
	lease time.Duration

	sent, failed, dead *metrics.CounterVec
}

// DelivererOptions configure NewDeliverer.
type DelivererOptions struct {
	Outbox   Outbox
	Projects []config.Project
	Owner    string // this process, as in run leases
	Log      *slog.Logger
	Now      func() time.Time
	Poll     time.Duration // default 1s
	Metrics  *metrics.Registry
}

// NewDeliverer builds the worker; Run starts it.
func NewDeliverer(o DelivererOptions) *Deliverer {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	d := &Deliverer{outbox: o.Outbox, projects: map[int64]*config.Project{}, owner: o.Owner, log: o.Log, now: o.Now,
		poll: o.Poll, wake: make(chan struct{}, 1),
		// No redirects: a destination's URL is the operator's, and a
		// redirect would carry the alert somewhere nobody configured.
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		sent:   o.Metrics.Counter("tributary_alerts_sent_total", "Alerts delivered, by destination and kind.", "project", "destination", "kind"),
		failed: o.Metrics.Counter("tributary_alerts_failed_total", "Alert delivery attempts that failed (each is retried until retry.attempts).", "project", "destination"),
		dead:   o.Metrics.Counter("tributary_alerts_dead_total", "Alerts given up on after retry.attempts failed attempts.", "project", "destination"),
	}
	d.lease = 30 * time.Second
	for i := range o.Projects {
		if a := o.Projects[i].Alerts; a != nil {
			d.projects[o.Projects[i].ID] = &o.Projects[i]
			for _, dest := range a.Destinations {
				d.lease = max(d.lease, time.Duration(dest.Timeout)+30*time.Second)
			}
		}
	}
	o.Metrics.GaugeFamily("tributary_alerts_pending", "Alerts waiting in the outbox for delivery.", []string{"project"},
		func(emit func(float64, ...string)) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			counts, err := d.outbox.AlertCounts(ctx)
			if err != nil {
				return
			}
			for p := range d.projects {
				emit(float64(counts[p][store.AlertPending]), fmt.Sprint(p))
			}
		})
	return d
}

// Wake asks the worker to look at the outbox now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	t := time.NewTicker(d.poll)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		for d.Once(ctx) > 0 && ctx.Err() == nil {
		}
		if now := d.now(); now.Sub(lastPrune) > time.Hour {
			lastPrune = now
			// Sent alerts are kept a while so that raising one again
			// (a retried end) still finds it delivered.
			if err := d.outbox.PruneAlerts(ctx, now.Add(-30*24*time.Hour).UnixMilli()); err != nil && ctx.Err() == nil {
				d.log.Warn("alerts: pruning the outbox", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// Once claims the alerts due now and delivers them, each on its own
// goroutine so that a slow destination does not hold the others up; it
// returns how many it claimed.
func (d *Deliverer) Once(ctx context.Context) int {
	// The lease outlasts the longest attempt with room to settle; the
	// alerts of a process that dies mid-attempt go to another then.
	now := d.now()
	return d.once(ctx, now, now.Add(d.lease))
}

// flushSettle is the time left after a flush's end for the settles of
// its last attempts: the lease holds until then, no longer.
const flushSettle = 5 * time.Second

// Flush makes one attempt at each alert due when it starts, until none
// is left or wait has passed: a one-shot process (`tributary sync`)
// hands over what it raised before it exits. One that fails waits in the
// outbox for its backoff, as with serve, and is not tried again here
// (the next process sends it). An attempt still going at the end is cut
// short and not settled: the alert stays pending without counting an
// attempt, leased only until the end plus flushSettle, so the next
// process (sync or serve) sends it. It returns how many alerts of the
// outbox are still pending.
func (d *Deliverer) Flush(ctx context.Context, wait time.Duration) (pending int64) {
	fctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := d.now()
	until := start.Add(wait + flushSettle)
	for fctx.Err() == nil && d.once(fctx, start, until) > 0 {
	}
	counts, err := d.outbox.AlertCounts(context.WithoutCancel(ctx))
	if err != nil {
		d.log.Warn("alerts: counting the outbox", "err", err)
		return 0
	}
	for _, c := range counts {
		pending += c[store.AlertPending]
	}
	return pending
}

// once claims the alerts due at due, leased until leaseUntil, and
// delivers them.
func (d *Deliverer) once(ctx context.Context, due, leaseUntil time.Time) int {
	alerts, err := d.outbox.ClaimAlerts(ctx, d.owner, due.UnixMilli(), leaseUntil.UnixMilli(), 32)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("alerts: reading the outbox", "err", err)
		}
		return 0
	}
	var wg sync.WaitGroup
	for _, a := range alerts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.deliver(ctx, a)
		}()
	}
	wg.Wait()
	return len(alerts)
}

// permanentError marks an answer that retrying will not change.
type permanentError struct{ error }

func (d *Deliverer) deliver(ctx context.Context, a store.Alert) {
	settle := store.AlertSettle{ID: a.ID, Destination: a.Destination, Owner: d.owner}
	p := d.projects[a.Project]
	dest := destination(p, a.Destination)
	project := fmt.Sprint(a.Project)
	var err error
	if dest == nil {
		err = permanentError{errors.New("the destination is no longer in the project's alerts")}
	} else {
		actx, cancel := context.WithTimeout(ctx, time.Duration(dest.Timeout))
		err = d.send(actx, dest, a)
		cancel()
	}
	settle.NowMs = d.now().UnixMilli()
	switch {
	case err == nil:
		settle.Status = store.AlertSent
		d.sent.Add(1, project, a.Destination, a.Kind)
	case ctx.Err() != nil:
		return // shutting down: the lease lapses and the alert is tried again
	default:
		d.failed.Add(1, project, a.Destination)
		settle.Error = err.Error()
		var perm permanentError
		attempts := 1
		if p != nil {
			attempts = p.Alerts.Retry.Attempts
		}
		if errors.As(err, &perm) || a.Attempts+1 >= attempts {
			settle.Status = store.AlertDead
			d.dead.Add(1, project, a.Destination)
			d.log.Error("alert given up", "alert", a.ID, "destination", a.Destination, "attempts", a.Attempts+1, "err", err)
		} else {
			settle.Status = store.AlertPending
			settle.NextMs = settle.NowMs + backoff(p.Alerts.Retry, a.Attempts).Milliseconds()
			d.log.Warn("alert not delivered; will retry", "alert", a.ID, "destination", a.Destination, "attempt", a.Attempts+1, "err", err)
		}
	}
	if err := d.outbox.SettleAlert(context.WithoutCancel(ctx), settle); err != nil {
		d.log.Warn("alerts: recording a delivery", "alert", a.ID, "err", err)
	}
}

// backoff is the wait after failed attempt number n (0-based).
func backoff(r config.AlertRetry, n int) time.Duration {
	w := time.Duration(r.Max)
	if n < 30 {
		w = min(time.Duration(r.Max), time.Duration(r.Base)<<n)
	}
	return w
}

func destination(p *config.Project, name string) *config.AlertDestination {
	if p == nil {
		return nil
	}
	for i := range p.Alerts.Destinations {
		if p.Alerts.Destinations[i].Name == name {
			return &p.Alerts.Destinations[i]
		}
	}
	return nil
}

func (d *Deliverer) send(ctx context.Context, dest *config.AlertDestination, a store.Alert) error {
	switch dest.Kind {
	case config.DestCommand:
		return runCommand(ctx, dest.Command, a)
	case config.DestSlack:
		body, err := slack(a.Body)
		if err != nil {
			return permanentError{err}
		}
		return d.post(ctx, dest, a, body)
	default:
		return d.post(ctx, dest, a, a.Body)
	}
}

func (d *Deliverer) post(ctx context.Context, dest *config.AlertDestination, a store.Alert, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest.URL, bytes.NewReader(body))
	if err != nil {
		return permanentError{errors.New("the destination URL is not usable")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tributary-alerts")
	req.Header.Set("Idempotency-Key", a.ID)
	req.Header.Set("X-Tributary-Alert-Kind", a.Kind)
	for k, v := range dest.Headers {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// Never the URL: it may hold the token.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST to %s: %w", dest.Name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests || c >= 500:
		return fmt.Errorf("POST to %s: HTTP %d", dest.Name, c)
	default:
		// 3xx, 4xx: the destination refuses this request as such.
		return permanentError{fmt.Errorf("POST to %s: HTTP %d", dest.Name, c)}
	}
}

// runCommand runs a command hook: the payload on stdin, the alert's id
// and kind in its environment, which holds nothing of the server's but
// PATH and HOME (the server's secrets stay with the server).
func runCommand(ctx context.Context, argv []string, a store.Alert) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(a.Body)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"TRIBUTARY_ALERT_ID=" + a.ID, "TRIBUTARY_ALERT_KIND=" + a.Kind}
	var stderr tail
	cmd.Stderr = &stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return fmt.Errorf("command %s: %w: %s", argv[0], err, msg)
		}
		return fmt.Errorf("command %s: %w", argv[0], err)
	}
	return nil
}

// tail keeps the last 512 bytes written, for an error message.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 512 {
		t.b = t.b[len(t.b)-512:]
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }
