package metrics

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// ProjectLabel is the label that says which project a series is about.
const ProjectLabel = "project"

// projectGatherer gathers only the series about one project: those
// whose project label is project. Families without that label (HTTP
// totals, histograms, queue depths, the Go runtime's and the process's)
// are left out whole: they sum over every project, so they would tell
// one project's owner about the others' traffic. A scraper that needs
// them uses the metrics_token.
func (r *Registry) projectGatherer(project string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		fams, err := r.reg.Gather()
		out := fams[:0]
		for _, f := range fams {
			kept := f.Metric[:0]
			for _, m := range f.Metric {
				if projectOf(m) == project {
					kept = append(kept, m)
				}
			}
			if len(kept) > 0 {
				f.Metric = kept
				out = append(out, f)
			}
		}
		return out, err
	})
}

// projectOf is a series' project label ("" without one).
func projectOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == ProjectLabel {
			return l.GetValue()
		}
	}
	return ""
}

// handlerOpts: a collector that fails (a store read timing out) costs
// its series, not the whole scrape, and is logged; OpenMetrics is served
// to scrapers that ask for it (Prometheus does).
func handlerOpts(log *slog.Logger) promhttp.HandlerOpts {
	return promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: slogPrintln{log}, EnableOpenMetrics: true}
}

// slogPrintln is the library's error log on slog.
type slogPrintln struct{ log *slog.Logger }

func (l slogPrintln) Println(v ...any) {
	l.log.Warn("metrics: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

// Handler serves every series, in the format the scraper asks for.
func (r *Registry) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(r.reg, handlerOpts(log))
}

// ProjectHandler serves the series about one project (projectGatherer).
func (r *Registry) ProjectHandler(project string, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(r.projectGatherer(project), handlerOpts(log))
}

// Write writes every series in the text exposition format.
func (r *Registry) Write(w io.Writer) error { return write(w, r.reg) }

// WriteProject writes the series about one project (projectGatherer) in
// the text exposition format.
func (r *Registry) WriteProject(w io.Writer, project string) error {
	return write(w, r.projectGatherer(project))
}

// write encodes what g gathers; a collector's error still writes the rest.
func write(w io.Writer, g prometheus.Gatherer) error {
	fams, gerr := g.Gather()
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return gerr
}
