package metrics

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// gaugeFamily is a labelled gauge whose series are read at scrape time,
// for values that live elsewhere (a store's counters): copying them into
// the registry on every change would mean a second, drifting copy.
type gaugeFamily struct {
	labels  []string
	collect func(emit func(v float64, values ...string))
}

// GaugeFamily registers (or replaces) a labelled gauge read at scrape
// time: collect calls emit once per series, label values in the order of
// labels. Collect runs without the registry's lock, so it may be slow.
func (r *Registry) GaugeFamily(name, help string, labels []string, collect func(emit func(v float64, values ...string))) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.families[name], r.help[name] = &gaugeFamily{labels: labels, collect: collect}, help
}

// write appends the family's series that keep takes, sorted by label values.
func (f *gaugeFamily) write(b *strings.Builder, name string, keep func(values []string) bool) {
	type series struct {
		key string
		v   float64
	}
	var all []series
	f.collect(func(v float64, values ...string) {
		if !keep(values) {
			return
		}
		if math.IsNaN(v) {
			v = 0
		}
		all = append(all, series{labelText(f.labels, values), v})
	})
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	fmt.Fprintf(b, "# TYPE %s gauge\n", name)
	for _, s := range all {
		fmt.Fprintf(b, "%s%s %g\n", name, s.key, s.v)
	}
}
