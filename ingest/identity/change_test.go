package identity

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestChangeEncoding(t *testing.T) {
	changes := []Change{
		{KindMerge, "a", "b"},
		{KindIdentify, "user@example.com", uuid4(7)},
		{KindAlias, "é 世界", string(make([]byte, 300))},
		{KindLink, "u1", "d1"},
	}
	var log []byte
	for _, c := range changes {
		var err error
		if log, err = c.AppendBinary(log); err != nil {
			t.Fatal(err)
		}
		b, _ := c.MarshalBinary()
		var d Change
		if err := d.UnmarshalBinary(b); err != nil || d != c {
			t.Fatalf("round trip %+v: %+v %v", c, d, err)
		}
	}
	for i := 0; len(log) > 0; i++ {
		c, n, err := DecodeChange(log)
		if err != nil || c != changes[i] {
			t.Fatalf("change %d: %+v %v", i, c, err)
		}
		log = log[n:]
	}
}

func TestChangeDecodingRejectsCorruption(t *testing.T) {
	good, _ := Change{KindMerge, "ab", "cd"}.MarshalBinary()
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown kind":   {9, 0, 0},
		"zero kind":      {0, 0, 0},
		"truncated":      good[:len(good)-1],
		"length too big": {1, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'},
		"bad varint":     {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, _, err := DecodeChange(b); !errors.Is(err, ErrCorruptLog) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var c Change
	if err := c.UnmarshalBinary(append(good, 0)); !errors.Is(err, ErrCorruptLog) {
		t.Errorf("trailing byte: %v", err)
	}
}

// randomOps drives a Graph with a mix of valid, repeated and refused
// operations and returns the log of accepted changes.
func randomOps(t *testing.T, g *Graph, seed uint64, n int) []Change {
	r := rand.New(rand.NewPCG(seed, 1))
	id := func(pool int) string {
		switch k := r.IntN(pool); k % 3 {
		case 0:
			return uuid4(k)
		case 1:
			return fmt.Sprint("user", k)
		default:
			return fmt.Sprint("x", k)
		}
	}
	var log []Change
	for range n {
		var c Change
		if g.Mode() == Simplified {
			c = Change{KindLink, fmt.Sprint("u", r.IntN(100)), fmt.Sprint("d", r.IntN(600))}
		} else {
			c = Change{Kind: Kind(1 + r.IntN(3)), A: id(1500), B: id(1500)}
			if r.IntN(20) == 0 {
				c.B = "not-a-uuid"
			}
		}
		changed, err := g.Apply(c)
		if err != nil && changed {
			t.Fatalf("%+v: changed with error %v", c, err)
		}
		if changed {
			log = append(log, c)
		}
	}
	return log
}

func TestReplayReproducesState(t *testing.T) {
	for _, mode := range []Mode{Original, Simplified} {
		t.Run(mode.String(), func(t *testing.T) {
			g := New(mode)
			log := randomOps(t, g, 42, 20000)
			if len(log) != g.Changes() || len(log) < 100 {
				t.Fatalf("%d changes logged, %d counted", len(log), g.Changes())
			}
			var enc []byte
			for _, c := range log {
				enc, _ = c.AppendBinary(enc)
			}
			var decoded []Change
			for len(enc) > 0 {
				c, n, err := DecodeChange(enc)
				if err != nil {
					t.Fatal(err)
				}
				decoded = append(decoded, c)
				enc = enc[n:]
			}
			r, err := Replay(mode, decoded)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(snapshot(g), snapshot(r)) || r.Changes() != g.Changes() {
				t.Fatal("replayed graph differs")
			}
			if mode == Original && maxCluster(g) != MaxClusterSize {
				t.Fatalf("the run never reached the cluster limit (largest %d)", maxCluster(g))
			}
		})
	}
}

func maxCluster(g *Graph) int {
	m := 0
	for _, name := range g.f.names {
		m = max(m, g.ClusterSize(name))
	}
	return m
}

func TestReplayRejectsDivergentLogs(t *testing.T) {
	link := Change{KindLink, "u1", "d1"}
	for name, log := range map[string][]Change{
		"repeated change": {link, link},
		"refused change":  {link, {KindLink, "u2", "d1"}},
		"other mode":      {{KindMerge, "a", "b"}},
	} {
		if _, err := Replay(Simplified, log); !errors.Is(err, ErrCorruptLog) {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := Replay(Simplified, []Change{link, {KindLink, "u2", "d1"}})
	if !errors.Is(err, ErrDeviceLinked) {
		t.Errorf("the cause is lost: %v", err)
	}
}

// FuzzDecodeChange: arbitrary bytes never panic, errors are typed, and
// whatever decodes survives an encode/decode round trip.
func FuzzDecodeChange(f *testing.F) {
	good, _ := Change{KindIdentify, "u", uuid4(1)}.MarshalBinary()
	f.Add(good)
	f.Add([]byte{4, 1, 'u', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, n, err := DecodeChange(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptLog) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if n < 1 || n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		// Non-minimal varints decode too, so compare values, not bytes.
		again, _ := c.AppendBinary(nil)
		c2, n2, err := DecodeChange(again)
		if err != nil || c2 != c || n2 != len(again) {
			t.Fatalf("%x decodes to %+v, which re-encodes to %x", data[:n], c, again)
		}
	})
}
