package amplitude

import (
	"fmt"
	"testing"
)

// The table answers exactly as the map it replaced: every mapped name
// finds its slot, and other keys (prefixes, near misses, empty) miss.
func TestFieldTable(t *testing.T) {
	tr := newTransformer()
	want := map[string]int{}
	for i, r := range renamed {
		want[r.from] = i
	}
	for i, name := range passedThrough {
		want[name] = len(renamed) + i
	}
	keys := []string{"", "a", "event_type", "user_properties", "$schema", "uuid", "amplitude_id", "Platform", "ip_addres", "ip_addresss", "city ", "dma\x00"}
	for name := range want {
		keys = append(keys, name, name[:len(name)-1], name+"x", "x"+name[1:])
	}
	for i := range 2000 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	for _, k := range keys {
		w, ok := want[k]
		if !ok {
			w = -1
		}
		if got := tr.slots.lookup([]byte(k)); got != w {
			t.Errorf("lookup(%q) = %d; want %d", k, got, w)
		}
	}
}
