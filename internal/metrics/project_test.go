package metrics

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A project-scoped scrape shows that project's series and nothing that
// sums over other projects.
func TestWriteProject(t *testing.T) {
	r := New()
	r.AddRuntime()
	acc := r.Counter("accepted_total", "Accepted.", "project")
	acc.Add(3, "1")
	acc.Add(5, "2")
	acc.Add(7, "12") // a prefix of no other id, but "1" must not match it
	rej := r.Counter("rejected_total", "Rejected.", "project", "reason")
	rej.Add(1, "2", "too_large")
	r.Counter("http_total", "HTTP.", "route", "code").Add(9, "import", "200")
	r.Counter("reaped_total", "Reaped.") // never incremented
	r.Gauge("queue", "Queue.", func() float64 { return 4 })
	r.Histogram("commit_seconds", "Commit.", 0.1).Observe(0)
	r.GaugeFamily("usage", "Usage.", []string{"source", "project"}, func(emit func(float64, ...string)) {
		emit(10, "track", "1")
		emit(20, "track", "2")
	})

	cases := []struct {
		project       string
		want, notWant []string
	}{
		{"1", []string{`accepted_total{project="1"} 3`, `usage{project="1",source="track"} 10`, "# TYPE accepted_total counter"},
			[]string{`project="2"`, `project="12"`, "rejected_total", "http_total", "reaped_total", "queue", "commit_seconds", "go_", "process_"}},
		{"2", []string{`accepted_total{project="2"} 5`, `rejected_total{project="2",reason="too_large"} 1`, `usage{project="2",source="track"} 20`},
			[]string{`project="1"`, "http_total", "queue", "commit_seconds", "go_", "process_"}},
		{"99", nil, []string{`project="`, "http_total", "# TYPE"}},
	}
	for _, tc := range cases {
		var b strings.Builder
		if err := r.WriteProject(&b, tc.project); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("project %s: missing %q in\n%s", tc.project, w, b.String())
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(b.String(), w) {
				t.Errorf("project %s: %q leaked into\n%s", tc.project, w, b.String())
			}
		}
	}
	var all strings.Builder
	if err := r.Write(&all); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`project="1"`, `project="2"`, `project="12"`, "http_total{", "queue 4", "commit_seconds_count 1", "reaped_total 0\n",
		"# TYPE go_goroutines gauge", "# TYPE process_cpu_seconds_total counter"} {
		if !strings.Contains(all.String(), w) {
			t.Errorf("the full scrape lacks %q", w)
		}
	}
}

// The project's handler serves the same scope in the format asked for.
func TestProjectHandler(t *testing.T) {
	r := New()
	acc := r.Counter("accepted_total", "Accepted.", "project")
	acc.Add(3, "1")
	acc.Add(5, "2")
	r.Counter("http_total", "HTTP.", "route", "code").Add(9, "import", "200")
	for _, accept := range []string{"", "application/openmetrics-text; version=1.0.0"} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		r.ProjectHandler("2", slog.New(slog.DiscardHandler)).ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, `accepted_total{project="2"} 5`) ||
			strings.Contains(body, `project="1"`) || strings.Contains(body, "http_total") {
			t.Errorf("Accept %q: %d %s\n%s", accept, rec.Code, rec.Header().Get("Content-Type"), body)
		}
		if accept != "" && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/openmetrics-text") {
			t.Errorf("Accept %q answered %s", accept, rec.Header().Get("Content-Type"))
		}
	}
}

// Reading a series does not create it; a label value that is not UTF-8
// is mended, not a panic.
func TestCounterValueAndOddLabels(t *testing.T) {
	r := New()
	c := r.Counter("x_total", "X.", "project", "reason")
	if c.Value("1", "a") != 0 {
		t.Fatal("a series never added reads non-zero")
	}
	c.Add(2, "1", "bad\xff")
	c.Add(1, "1", "a")
	if got := c.Value("1", "a"); got != 1 {
		t.Fatalf("Value = %d, want 1", got)
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "x_total{project=\"1\",reason=\"bad\uFFFD\"} 2\n") ||
		!strings.Contains(b.String(), "x_total{project=\"1\",reason=\"a\"} 1\n") {
		t.Fatalf("scrape:\n%s", b.String())
	}
}
