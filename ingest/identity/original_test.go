package identity

import (
	"errors"
	"fmt"
	"testing"
)

func TestMerge(t *testing.T) {
	g := New(Original)
	changes(t)(g.Merge("c", "d"))
	changes(t)(g.Merge("a", "c"))
	// The id registered first is canonical, wherever later merges come from.
	wantResolve(t, g, "a", "c", "c", "c", "d", "c", "unknown", "unknown")
	unchanged(t)(g.Merge("d", "a"))
	unchanged(t)(g.Merge("x", "x"))
	refused(t, ErrInvalidID)(g.Merge("", "a"))
	if g.Len() != 3 || g.ClusterSize("a") != 3 || g.ClusterSize("zz") != 1 || g.Changes() != 2 {
		t.Fatalf("len %d, sizes %d %d, changes %d", g.Len(), g.ClusterSize("a"), g.ClusterSize("zz"), g.Changes())
	}
}

func TestClusterLimit(t *testing.T) {
	tests := []struct {
		name   string
		sa, sb int
		ok     bool
	}{
		{"250 + 250", 250, 250, true},
		{"499 + 1", 499, 1, true},
		{"300 + 201", 300, 201, false},
		{"500 + 1", 500, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Original)
			cluster(t, g, "a", tt.sa)
			cluster(t, g, "b", tt.sb)
			before := snapshot(g)
			changed, err := g.Merge("a7", "b0")
			if tt.ok {
				changes(t)(changed, err)
				if g.ClusterSize("b0") != tt.sa+tt.sb {
					t.Fatalf("size %d", g.ClusterSize("b0"))
				}
				wantResolve(t, g, "b0", "a0", "a7", "a0")
				return
			}
			refused(t, ErrClusterFull)(changed, err)
			var ce *ClusterLimitError
			if !errors.As(err, &ce) || ce.SizeA != tt.sa || ce.SizeB != tt.sb || ce.A != "a7" || ce.B != "b0" {
				t.Fatalf("error %#v", err)
			}
			after := snapshot(g)
			if len(after) != len(before) {
				t.Fatalf("ids %d -> %d", len(before), len(after))
			}
			for id, v := range before {
				if after[id] != v {
					t.Fatalf("refused merge changed %q: %+v -> %+v", id, v, after[id])
				}
			}
		})
	}
}

func TestClusterLimitAppliesToEveryMerge(t *testing.T) {
	g := New(Original)
	cluster(t, g, "a", MaxClusterSize)
	anon := uuid4(1)
	refused(t, ErrClusterFull)(g.Identify("a0", anon))
	refused(t, ErrClusterFull)(g.CreateAlias("new-alias", "a3"))
	refused(t, ErrClusterFull)(g.Merge("a1", "new"))
	// New ids stay orphaned: clusters of their own, unknown to the graph.
	if g.Len() != MaxClusterSize {
		t.Fatalf("len %d", g.Len())
	}
	wantResolve(t, g, anon, anon, "new-alias", "new-alias", "new", "new")
}

func TestIdentify(t *testing.T) {
	anon, anon2 := uuid4(1), uuid4(2)

	t.Run("merges and the identified id is canonical", func(t *testing.T) {
		g := New(Original)
		changes(t)(g.Merge(anon, anon2)) // anon seen first
		changes(t)(g.Identify("user", anon))
		wantResolve(t, g, anon, "user", anon2, "user", "user", "user")
		unchanged(t)(g.Identify("user", anon2))
	})
	t.Run("anon already merged with another user", func(t *testing.T) {
		g := New(Original)
		changes(t)(g.Identify("u1", anon))
		refused(t, ErrAnonMerged)(g.Identify("u2", anon))
		wantResolve(t, g, anon, "u1", "u2", "u2")
	})
	t.Run("same cluster marks the identified id", func(t *testing.T) {
		g := New(Original)
		changes(t)(g.Merge(anon, "user"))
		wantResolve(t, g, "user", anon)
		changes(t)(g.Identify("user", anon))
		wantResolve(t, g, "user", "user", anon, "user")
	})
	t.Run("merged identified clusters keep the first identified", func(t *testing.T) {
		g := New(Original)
		changes(t)(g.Identify("u1", anon))
		changes(t)(g.Identify("u2", anon2))
		changes(t)(g.Merge("u2", "u1")) // $merge has no conditions
		wantResolve(t, g, "u2", "u1", anon2, "u1")
	})
	for _, bad := range []string{
		"not-a-uuid",
		"3f2504e0-4f89-11d3-9a0c-0305e82c3301", // version 1
		"3f2504e0-4f89-41d3-7a0c-0305e82c3301", // wrong variant
		"3f2504e04f8941d39a0c0305e82c3301",     // no hyphens (uuid4().hex)
		"$device:",                             // a prefix with no device
		"device:3f2504e0-4f89-41d3-9a0c-0305e82c3301",
		"3f2504e0-4f89-41d3-9a0c-0305e82c330g",
	} {
		t.Run("refuses "+bad, func(t *testing.T) {
			g := New(Original)
			refused(t, ErrNotUUIDv4)(g.Identify("user", bad))
			if g.Len() != 0 {
				t.Fatal("refused identify registered ids")
			}
		})
	}
	// mixpanel-browser's identify() sends the previous distinct_id,
	// "$device:" + a UUID, as $anon_distinct_id; other SDKs' device ids
	// are not always UUIDs.
	for _, dev := range []string{"$device:3f2504e0-4f89-41d3-9a0c-0305e82c3301", "$device:A1B2C3D4-IDFV", "$device:1"} {
		t.Run("accepts "+dev, func(t *testing.T) {
			g := New(Original)
			changes(t)(g.Identify("user", dev))
			wantResolve(t, g, "user", "user", dev, "user")
		})
	}
	t.Run("accepts upper case", func(t *testing.T) {
		changes(t)(New(Original).Identify("user", "3F2504E0-4F89-41D3-BA0C-0305E82C3301"))
	})
	t.Run("empty ids", func(t *testing.T) {
		refused(t, ErrInvalidID)(New(Original).Identify("", anon))
	})
}

func TestCreateAlias(t *testing.T) {
	g := New(Original)
	changes(t)(g.CreateAlias("alias1", "orig"))
	changes(t)(g.CreateAlias("alias2", "orig"))   // many aliases, one id
	changes(t)(g.CreateAlias("alias3", "alias1")) // chained
	wantResolve(t, g, "alias1", "orig", "alias2", "orig", "alias3", "orig")
	unchanged(t)(g.CreateAlias("alias1", "orig"))
	refused(t, ErrAliasTaken)(g.CreateAlias("alias1", "other"))
	wantResolve(t, g, "other", "other")
	unchanged(t)(g.CreateAlias("same", "same"))
	refused(t, ErrInvalidID)(g.CreateAlias("", "orig"))
	// An id already in the cluster can still become an alias, once.
	changes(t)(g.Merge("orig", "m"))
	changes(t)(g.CreateAlias("m", "alias2"))
	refused(t, ErrAliasTaken)(g.CreateAlias("m", "orig"))
}

func TestModesIgnoreEachOther(t *testing.T) {
	o, s := New(Original), New(Simplified)
	refused(t, ErrWrongMode)(o.Link("u", "d"))
	for _, c := range []Change{{KindMerge, "a", "b"}, {KindIdentify, "u", uuid4(1)}, {KindAlias, "a", "b"}} {
		refused(t, ErrWrongMode)(s.Apply(c))
	}
	refused(t, ErrCorruptLog)(o.Apply(Change{Kind: 9, A: "a", B: "b"}))
	if o.Len()+s.Len() != 0 {
		t.Fatal("refusals registered ids")
	}
	if m, err := ParseMode(" Simplified "); m != Simplified || err != nil {
		t.Fatalf("ParseMode: %v %v", m, err)
	}
	if _, err := ParseMode("legacy"); err == nil {
		t.Fatal("ParseMode accepted legacy")
	}
}

// Resolve and ClusterSize never write, so concurrent readers are safe; run
// with -race to check.
func TestConcurrentReaders(t *testing.T) {
	g := New(Original)
	cluster(t, g, "a", 300)
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for i := range 1000 {
				ok = ok && g.Resolve(fmt.Sprint("a", i%300)) == "a0" && g.ClusterSize("a1") == 300
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("a reader saw a wrong state")
		}
	}
}
