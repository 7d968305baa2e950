package metrics

import (
	"fmt"
	"strings"
	"testing"
)

// A gauge family is read afresh at every scrape, its series sorted and
// its label values escaped.
func TestGaugeFamilyReadAtScrape(t *testing.T) {
	r := New()
	n := 0
	r.GaugeFamily("usage", "Usage.", []string{"project", "source"}, func(emit func(float64, ...string)) {
		n++
		emit(float64(n*10), "2", "track")
		emit(float64(n), "1", `im"port`)
	})
	for i := 1; i <= 2; i++ {
		var b strings.Builder
		if err := r.Write(&b); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("# HELP usage Usage.\n# TYPE usage gauge\nusage{project=\"1\",source=\"im\\\"port\"} %d\nusage{project=\"2\",source=\"track\"} %d\n", i, i*10)
		if b.String() != want {
			t.Fatalf("scrape %d:\n%s\nwant\n%s", i, b.String(), want)
		}
	}
}
