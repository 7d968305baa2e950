package ratelimit

import (
	"testing"
	"time"
)

func TestKeyedBucket(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	k := NewKeyed[string](Rate{Burst: 3, Every: time.Second}, func() time.Time { return now }, 0)
	steps := []struct {
		advance time.Duration
		key     string
		want    bool
	}{
		{0, "a", true},
		{0, "a", true},
		{0, "a", true},                       // the burst is spent
		{0, "a", false},                      // refused
		{0, "b", true},                       // keys do not share a bucket
		{999 * time.Millisecond, "a", false}, // not yet a whole token
		{time.Millisecond, "a", true},        // one second: one token
		{0, "a", false},
		{time.Hour, "a", true}, // idle: refilled up to the burst, not beyond
		{0, "a", true},
		{0, "a", true},
		{0, "a", false},
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		got, wait := k.Allow(s.key)
		if got != s.want {
			t.Fatalf("step %d: Allow(%q) = %v, want %v", i, s.key, got, s.want)
		}
		if !got && (wait <= 0 || wait > time.Second) {
			t.Fatalf("step %d: refused with retry-after %v, want within (0, 1s]", i, wait)
		}
	}
}

func TestKeyedBoundedKeys(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	k := NewKeyed[int](Rate{Burst: 2, Every: time.Minute}, func() time.Time { return now }, 100)
	for i := range 10_000 { // a spray of addresses, each busy (one token left)
		k.Allow(i)
		if k.Len() > 100 {
			t.Fatalf("after %d keys the table holds %d, over its bound of 100", i+1, k.Len())
		}
	}
	// Idle keys are dropped first: a busy key survives a sweep.
	k = NewKeyed[int](Rate{Burst: 2, Every: time.Minute}, func() time.Time { return now }, 4)
	k.Allow(-1)
	k.Allow(-1) // key -1 is empty
	for i := range 3 {
		k.Allow(i)
	}
	now = now.Add(2 * time.Minute) // keys 0..2 refill; -1 refills too
	k.Allow(-1)
	k.Allow(-1)  // -1 empty again
	k.Allow(100) // the table is full: the sweep drops the idle keys 0..2
	if ok, _ := k.Allow(-1); ok {
		t.Fatal("a sweep forgot a busy key while idle ones were there to drop")
	}
}

func TestKeyedNilAllows(t *testing.T) {
	var k *Keyed[string]
	if ok, _ := k.Allow("x"); !ok {
		t.Fatal("a nil limiter must allow")
	}
}

func TestPerSecond(t *testing.T) {
	r := PerSecond(100)
	if r.Burst != 200 || r.Every != 10*time.Millisecond {
		t.Fatalf("PerSecond(100) = %+v", r)
	}
}

func TestClientAddr(t *testing.T) {
	cases := []struct{ in, want string }{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"[::ffff:192.0.2.7]:5555", "192.0.2.7"},
		{"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::"},
		{"[2001:db8:1:2::1]:443", "2001:db8:1:2::"},
		{"not an address", "invalid IP"},
	}
	for _, c := range cases {
		if got := ClientAddr(c.in).String(); got != c.want {
			t.Errorf("ClientAddr(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}
