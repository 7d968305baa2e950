package identity

import (
	"fmt"
	"testing"
)

// A project with a million ids in clusters of four (Original) or one user
// with three devices (Simplified).
const benchIDs = 1_000_000

func benchGraph(b *testing.B, mode Mode) (*Graph, []string) {
	g := New(mode)
	ids := make([]string, 0, benchIDs)
	for i := 0; i < benchIDs; i += 4 {
		user := fmt.Sprint("user-", i)
		ids = append(ids, user)
		for j := 1; j < 4; j++ {
			dev := fmt.Sprintf("dev-%d-%d", i, j)
			if mode == Simplified {
				if _, err := g.Link(user, dev); err != nil {
					b.Fatal(err)
				}
				dev = DevicePrefix + dev
			} else if _, err := g.Merge(user, dev); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, dev)
		}
	}
	return g, ids
}

func BenchmarkResolve(b *testing.B) {
	for _, mode := range []Mode{Original, Simplified} {
		b.Run(mode.String(), func(b *testing.B) {
			g, ids := benchGraph(b, mode)
			i := 0
			b.ResetTimer()
			for b.Loop() {
				if g.Resolve(ids[i%len(ids)]) == "" {
					b.Fatal("empty")
				}
				i += 7919 // stride through memory like real lookups
			}
		})
	}
}

// BenchmarkMerge and BenchmarkLink add fresh ids to the million-id graph,
// which is built once and shared by the rounds of b.N.
func BenchmarkMerge(b *testing.B) {
	g, _ := benchGraph(b, Original)
	b.Run("new-pair", func(b *testing.B) {
		names := make([]string, 2*b.N)
		for i := range names {
			names[i] = fmt.Sprint("new-", b.N, "-", i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := g.Merge(names[2*i], names[2*i+1]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLink(b *testing.B) {
	g, _ := benchGraph(b, Simplified)
	b.Run("new-device", func(b *testing.B) {
		devs := make([]string, b.N)
		for i := range devs {
			devs[i] = fmt.Sprint("new-dev-", b.N, "-", i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := g.Link(fmt.Sprint("user-", 4*(i%1000)), devs[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkReplay(b *testing.B) {
	g := New(Simplified)
	var log []Change
	for i := range 100_000 {
		c := Change{KindLink, fmt.Sprint("u", i/4), fmt.Sprint("d", i)}
		if _, err := g.Apply(c); err != nil {
			b.Fatal(err)
		}
		log = append(log, c)
	}
	for b.Loop() {
		if _, err := Replay(Simplified, log); err != nil {
			b.Fatal(err)
		}
	}
}
