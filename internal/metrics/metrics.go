// Package metrics keeps the server's counters and histograms and writes
// them in the Prometheus text exposition format. It is deliberately tiny:
// a handful of series does not justify a client library and its globals.
package metrics

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Registry owns every series; one per server, no package-level state.
type Registry struct {
	mu       sync.Mutex
	counters map[string]*CounterVec
	hists    map[string]*Histogram
	gauges   map[string]func() float64
	families map[string]*gaugeFamily // family.go
	help     map[string]string
}

func New() *Registry {
	return &Registry{
		counters: map[string]*CounterVec{},
		hists:    map[string]*Histogram{},
		gauges:   map[string]func() float64{},
		families: map[string]*gaugeFamily{},
		help:     map[string]string{},
	}
}

// CounterVec is a counter family keyed by label values.
type CounterVec struct {
	labels []string
	mu     sync.RWMutex
	series map[string]*atomic.Int64
}

// Counter registers (or returns) a counter family.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.counters[name]; ok {
		return c
	}
	c := &CounterVec{labels: labels, series: map[string]*atomic.Int64{}}
	r.counters[name], r.help[name] = c, help
	return c
}

// Add increments the series with these label values (in declaration order).
func (c *CounterVec) Add(n int64, values ...string) {
	key := strings.Join(values, "\x00")
	c.mu.RLock()
	v := c.series[key]
	c.mu.RUnlock()
	if v == nil {
		c.mu.Lock()
		if v = c.series[key]; v == nil {
			v = new(atomic.Int64)
			c.series[key] = v
		}
		c.mu.Unlock()
	}
	v.Add(n)
}

// Value reads one series (for tests and health reports).
func (c *CounterVec) Value(values ...string) int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v := c.series[strings.Join(values, "\x00")]; v != nil {
		return v.Load()
	}
	return 0
}

// Histogram counts observations into fixed buckets (seconds).
type Histogram struct {
	bounds []float64
	mu     sync.Mutex
	counts []uint64
	sum    float64
	n      uint64
}

// Histogram registers a histogram with the given upper bounds in seconds.
func (r *Registry) Histogram(name, help string, bounds ...float64) *Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.hists[name]; ok {
		return h
	}
	h := &Histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
	r.hists[name], r.help[name] = h, help
	return h
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	h.mu.Lock()
	for i, b := range h.bounds {
		if s <= b {
			h.counts[i]++
		}
	}
	h.sum += s
	h.n++
	h.mu.Unlock()
}

// Gauge registers a value read at scrape time.
func (r *Registry) Gauge(name, help string, f func() float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gauges[name], r.help[name] = f, help
}

// Write writes every series in the text exposition format.
func (r *Registry) Write(w io.Writer) error { return r.write(w, nil) }

// ProjectLabel is the label that says which project a series is about.
const ProjectLabel = "project"

// WriteProject writes only the series about one project: those whose
// project label is project. Families without that label (HTTP totals,
// histograms, queue depths) are left out whole: they sum over every
// project, so they would tell one project's owner about the others'
// traffic. A scraper that needs them uses the metrics_token.
func (r *Registry) WriteProject(w io.Writer, project string) error {
	return r.write(w, &project)
}

// write writes every series, or with project set only that project's.
func (r *Registry) write(w io.Writer, project *string) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.help))
	for n := range r.help {
		names = append(names, n)
	}
	r.mu.Unlock()
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		r.mu.Lock()
		c, h, g, f, help := r.counters[name], r.hists[name], r.gauges[name], r.families[name], r.help[name]
		r.mu.Unlock()
		var labels []string
		switch {
		case c != nil:
			labels = c.labels
		case f != nil:
			labels = f.labels
		}
		pi := slices.Index(labels, ProjectLabel)
		if project != nil && pi < 0 {
			continue
		}
		// keep reports whether a series with these label values is written.
		keep := func(values []string) bool {
			return project == nil || pi < len(values) && values[pi] == *project
		}
		fmt.Fprintf(&b, "# HELP %s %s\n", name, help)
		switch {
		case c != nil:
			fmt.Fprintf(&b, "# TYPE %s counter\n", name)
			c.mu.RLock()
			keys := make([]string, 0, len(c.series))
			for k := range c.series {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				values := strings.Split(k, "\x00")
				if keep(values) {
					fmt.Fprintf(&b, "%s%s %d\n", name, labelText(c.labels, values), c.series[k].Load())
				}
			}
			c.mu.RUnlock()
		case h != nil:
			fmt.Fprintf(&b, "# TYPE %s histogram\n", name)
			h.mu.Lock()
			for i, bound := range h.bounds {
				fmt.Fprintf(&b, "%s_bucket{le=\"%g\"} %d\n", name, bound, h.counts[i])
			}
			fmt.Fprintf(&b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, h.n, name, h.sum, name, h.n)
			h.mu.Unlock()
		case g != nil:
			v := g()
			if math.IsNaN(v) {
				v = 0
			}
			fmt.Fprintf(&b, "# TYPE %s gauge\n%s %g\n", name, name, v)
		case f != nil:
			f.write(&b, name, keep)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func labelText(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	parts := make([]string, len(names))
	for i, n := range names {
		v := ""
		if i < len(values) {
			v = values[i]
		}
		v = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
		parts[i] = n + `="` + v + `"`
	}
	return "{" + strings.Join(parts, ",") + "}"
}
