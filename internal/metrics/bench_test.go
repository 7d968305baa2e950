package metrics

import (
	"io"
	"strconv"
	"testing"
	"time"
)

// The hot path: one request counts its route and code, its project's
// records, and observes its commit wait.
func BenchmarkCounterAdd(b *testing.B) {
	c := New().Counter("accepted_total", "Accepted.", "project")
	b.ReportAllocs()
	for b.Loop() {
		c.Add(3, "12")
	}
}

func BenchmarkCounterAdd2Labels(b *testing.B) {
	c := New().Counter("http_total", "HTTP.", "route", "code")
	b.ReportAllocs()
	for b.Loop() {
		c.Add(1, "import", "200")
	}
}

func BenchmarkCounterAddParallel(b *testing.B) {
	c := New().Counter("http_total", "HTTP.", "route", "code")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Add(1, "import", "200")
		}
	})
}

func BenchmarkHistogramObserve(b *testing.B) {
	h := New().Histogram("commit_seconds", "Commit.", 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
	b.ReportAllocs()
	for b.Loop() {
		h.Observe(3 * time.Millisecond)
	}
}

// A project's scrape of a registry holding 50 projects' series.
func BenchmarkScrapeProject(b *testing.B) {
	r := New()
	acc := r.Counter("accepted_total", "Accepted.", "project")
	rej := r.Counter("rejected_total", "Rejected.", "project", "reason")
	r.Counter("http_total", "HTTP.", "route", "code").Add(9, "import", "200")
	r.Histogram("commit_seconds", "Commit.", 0.001, 0.01, 0.1, 1).Observe(time.Millisecond)
	for p := range 50 {
		acc.Add(int64(p), strconv.Itoa(p))
		rej.Add(1, strconv.Itoa(p), "too_large")
	}
	r.GaugeFamily("usage", "Usage.", []string{"project", "source"}, func(emit func(float64, ...string)) {
		for p := range 50 {
			emit(float64(p), strconv.Itoa(p), "track")
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		if err := r.WriteProject(io.Discard, "7"); err != nil {
			b.Fatal(err)
		}
	}
}
