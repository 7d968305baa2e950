package metrics

import (
	"strings"
	"testing"
)

// A project-scoped scrape shows that project's series and nothing that
// sums over other projects.
func TestWriteProject(t *testing.T) {
	r := New()
	acc := r.Counter("accepted_total", "Accepted.", "project")
	acc.Add(3, "1")
	acc.Add(5, "2")
	acc.Add(7, "12") // a prefix of no other id, but "1" must not match it
	rej := r.Counter("rejected_total", "Rejected.", "project", "reason")
	rej.Add(1, "2", "too_large")
	r.Counter("http_total", "HTTP.", "route", "code").Add(9, "import", "200")
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
		{"1", []string{`accepted_total{project="1"} 3`, `usage{source="track",project="1"} 10`, "# TYPE rejected_total counter"},
			[]string{`project="2"`, `project="12"`, "http_total", "queue", "commit_seconds"}},
		{"2", []string{`accepted_total{project="2"} 5`, `rejected_total{project="2",reason="too_large"} 1`, `usage{source="track",project="2"} 20`},
			[]string{`project="1"`, "http_total", "queue", "commit_seconds"}},
		{"99", []string{"# TYPE accepted_total counter"}, []string{`project="`, "http_total"}},
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
	for _, w := range []string{`project="1"`, `project="2"`, `project="12"`, "http_total{", "queue 4", "commit_seconds_count 1"} {
		if !strings.Contains(all.String(), w) {
			t.Errorf("the full scrape lacks %q", w)
		}
	}
}
