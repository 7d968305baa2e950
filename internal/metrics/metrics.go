// Package metrics is the server's registry of counters, histograms and
// gauges, on the Prometheus client library (client_golang): the
// exposition (text, OpenMetrics, protobuf, gzip) is the library's, and
// this package adds what Tributary needs over it: registration by name
// from any layer without package-level state, gauges read from the store
// at scrape time, and scrapes scoped to one project (project.go).
package metrics

import (
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// Registry owns every series; one per server, no package-level state
// (the library's default registry is never used).
type Registry struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	counters map[string]*CounterVec
	hists    map[string]*Histogram
	// byName are the gauges and gauge families, which registering again
	// replaces (a component built anew reads from its new source).
	byName map[string]prometheus.Collector
}

func New() *Registry {
	return &Registry{
		reg:      prometheus.NewRegistry(),
		counters: map[string]*CounterVec{},
		hists:    map[string]*Histogram{},
		byName:   map[string]prometheus.Collector{},
	}
}

// AddRuntime adds the Go runtime's and the process's collectors (go_*,
// process_*). They describe the whole process, carry no project label,
// and so are in the full scrape only, never in a project's.
func (r *Registry) AddRuntime() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		// Registered twice (a second server in one process): the first stays.
		_ = r.reg.Register(c)
	}
}

// CounterVec is a counter family keyed by label values.
type CounterVec struct {
	labels []string
	vec    *prometheus.CounterVec
}

// Counter registers (or returns) a counter family.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.counters[name]; ok {
		return c
	}
	c := &CounterVec{labels: labels, vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)}
	r.reg.MustRegister(c.vec)
	if len(labels) == 0 {
		// Its one series exists from the start at 0, so that rate() and
		// increase() see the first increment.
		c.vec.WithLabelValues()
	}
	r.counters[name] = c
	return c
}

// Add increments the series with these label values (in declaration
// order). Values the exposition cannot carry are mended rather than
// refused: a count is never worth a panic.
func (c *CounterVec) Add(n int64, values ...string) {
	if m, err := c.vec.GetMetricWithLabelValues(validUTF8(values)...); err == nil {
		m.Add(float64(n))
	}
}

// Value reads one series (for tests and health reports) without creating it.
func (c *CounterVec) Value(values ...string) int64 {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.vec.Collect(ch); close(ch) }()
	var out int64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil && sameLabels(c.labels, values, d.GetLabel()) {
			out = int64(d.GetCounter().GetValue())
		}
	}
	return out
}

// sameLabels reports whether pairs (sorted by name, as the library
// keeps them) are names=values.
func sameLabels(names, values []string, pairs []*dto.LabelPair) bool {
	if len(names) != len(values) || len(pairs) != len(names) {
		return false
	}
	for i, n := range names {
		found := false
		for _, p := range pairs {
			if p.GetName() == n {
				found = p.GetValue() == values[i]
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Histogram counts observations into fixed buckets (seconds).
type Histogram struct {
	h prometheus.Histogram
}

// Histogram registers (or returns) a histogram with the given upper
// bounds in seconds.
func (r *Registry) Histogram(name, help string, bounds ...float64) *Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.hists[name]; ok {
		return h
	}
	h := &Histogram{h: prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: bounds})}
	r.reg.MustRegister(h.h)
	r.hists[name] = h
	return h
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) { h.h.Observe(d.Seconds()) }

// Gauge registers (or replaces) a value read at scrape time.
func (r *Registry) Gauge(name, help string, f func() float64) {
	r.replace(name, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		return noNaN(f())
	}))
}

// replace registers c under name, unregistering what was there.
func (r *Registry) replace(name string, c prometheus.Collector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[name]; ok {
		r.reg.Unregister(old)
	}
	r.reg.MustRegister(c)
	r.byName[name] = c
}

// validUTF8 returns values, or a copy with invalid UTF-8 mended (the
// library refuses such label values).
func validUTF8(values []string) []string {
	for i, v := range values {
		if !utf8.ValidString(v) {
			out := append([]string(nil), values...)
			for j := i; j < len(out); j++ {
				out[j] = strings.ToValidUTF8(out[j], "\uFFFD")
			}
			return out
		}
	}
	return values
}

// noNaN: a gauge that cannot be read now reads 0, as it always has here.
func noNaN(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}
