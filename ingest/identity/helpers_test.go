package identity

import (
	"errors"
	"fmt"
	"testing"
)

// uuid4 returns a distinct valid UUIDv4 for each n.
func uuid4(n int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
}

// cluster builds, with $merge, one cluster of size ids named prefix0…; the
// canonical id is prefix0.
func cluster(t testing.TB, g *Graph, prefix string, size int) {
	t.Helper()
	for i := 1; i < size; i++ {
		if ok, err := g.Merge(prefix+"0", fmt.Sprintf("%s%d", prefix, i)); !ok || err != nil {
			t.Fatalf("building %s: merge %d: %v %v", prefix, i, ok, err)
		}
	}
}

// changes checks that an operation was accepted and changed the graph:
// changes(t)(g.Merge(a, b)).
func changes(t *testing.T) func(bool, error) {
	return func(changed bool, err error) {
		t.Helper()
		if err != nil || !changed {
			t.Fatalf("want a change, got changed=%v err=%v", changed, err)
		}
	}
}

// unchanged checks that an operation was accepted as already holding.
func unchanged(t *testing.T) func(bool, error) {
	return func(changed bool, err error) {
		t.Helper()
		if err != nil || changed {
			t.Fatalf("want no change and no error, got changed=%v err=%v", changed, err)
		}
	}
}

// refused checks that an operation was refused with want.
func refused(t *testing.T, want error) func(bool, error) {
	return func(changed bool, err error) {
		t.Helper()
		if changed || !errors.Is(err, want) {
			t.Fatalf("want refusal %v, got changed=%v err=%v", want, changed, err)
		}
	}
}

func wantResolve(t *testing.T, g *Graph, pairs ...string) {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if got := g.Resolve(pairs[i]); got != pairs[i+1] {
			t.Errorf("Resolve(%q) = %q, want %q", pairs[i], got, pairs[i+1])
		}
	}
}

// view is the observable state of a Graph, keyed by id, for comparing two
// Graphs built by different paths.
type view map[string]struct {
	canon   string
	size    int
	ident   bool
	aliasOf string
}

func snapshot(g *Graph) view {
	v := make(view, g.Len())
	for i, name := range g.f.names {
		e := v[name]
		e.canon, e.size, e.ident = g.Resolve(name), g.ClusterSize(name), g.f.ident[i]
		if t, ok := g.alias[int32(i)]; ok {
			e.aliasOf = g.f.names[t]
		}
		v[name] = e
	}
	return v
}
