package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// gaugeFamily is a labelled gauge whose series are read at scrape time,
// for values that live elsewhere (a store's counters): copying them into
// the registry on every change would mean a second, drifting copy.
type gaugeFamily struct {
	desc    *prometheus.Desc
	collect func(emit func(v float64, values ...string))
}

// GaugeFamily registers (or replaces) a labelled gauge read at scrape
// time: collect calls emit once per series, label values in the order of
// labels. Collect runs at each scrape, outside the registry's lock, so it
// may be slow.
func (r *Registry) GaugeFamily(name, help string, labels []string, collect func(emit func(v float64, values ...string))) {
	r.replace(name, &gaugeFamily{desc: prometheus.NewDesc(name, help, labels, nil), collect: collect})
}

// Describe implements prometheus.Collector.
func (f *gaugeFamily) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }

// Collect implements prometheus.Collector. A series whose values do not
// fit the labels is left out (NewConstMetric refuses it).
func (f *gaugeFamily) Collect(ch chan<- prometheus.Metric) {
	f.collect(func(v float64, values ...string) {
		if m, err := prometheus.NewConstMetric(f.desc, prometheus.GaugeValue, noNaN(v), validUTF8(values)...); err == nil {
			ch <- m
		}
	})
}
