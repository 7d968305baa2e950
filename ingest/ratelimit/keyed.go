package ratelimit

import (
	"net/netip"
	"sync"
	"time"
)

// Rate is a token bucket: Burst requests at once, then one every Every.
// A zero Burst allows nothing; use a nil *Keyed for "no limit".
type Rate struct {
	Burst int
	Every time.Duration
}

// PerSecond is n requests a second with a burst of two seconds' worth.
func PerSecond(n int) Rate {
	return Rate{Burst: 2 * n, Every: time.Second / time.Duration(max(n, 1))}
}

// Keyed counts requests per key (a client address, an account, a project)
// against one Rate: the request-count limits of the unauthenticated
// endpoints, where the per-project byte budget (Limiter) cannot apply
// because nothing proves which project is asking.
//
// Memory is bounded by maxKeys: when the table is full, keys whose bucket
// has refilled (idle ones, indistinguishable from new) are dropped; if
// most keys are busy the table starts afresh, which forgives the current
// clients rather than growing without bound under a spray of addresses.
type Keyed[K comparable] struct {
	rate    Rate
	now     func() time.Time
	maxKeys int

	mu      sync.Mutex
	buckets map[K]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date
}

// NewKeyed returns a limiter of rate per key, keeping at most maxKeys
// keys (≤ 0: 65,536). now is the clock (nil: time.Now).
func NewKeyed[K comparable](rate Rate, now func() time.Time, maxKeys int) *Keyed[K] {
	if now == nil {
		now = time.Now
	}
	if maxKeys <= 0 {
		maxKeys = 1 << 16
	}
	return &Keyed[K]{rate: rate, now: now, maxKeys: maxKeys, buckets: map[K]*bucket{}}
}

// Allow takes one request from key's bucket. When the bucket is empty it
// returns false and how long until the next request would be allowed.
// A nil *Keyed allows everything.
func (k *Keyed[K]) Allow(key K) (bool, time.Duration) {
	if k == nil {
		return true, 0
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buckets[key]
	if b == nil {
		if len(k.buckets) >= k.maxKeys {
			k.sweep(now)
		}
		b = &bucket{tokens: float64(k.rate.Burst), at: now}
		k.buckets[key] = b
	}
	k.refill(b, now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(k.rate.Every))
	}
	b.tokens--
	return true, 0
}

func (k *Keyed[K]) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 && k.rate.Every > 0 {
		b.tokens = min(float64(k.rate.Burst), b.tokens+float64(d)/float64(k.rate.Every))
	}
	b.at = now
}

// sweep drops full buckets; if more than half the table is still busy it
// drops everything, so that at least maxKeys/2 new keys come between two
// sweeps and a full table costs O(1) per key, amortised.
func (k *Keyed[K]) sweep(now time.Time) {
	for key, b := range k.buckets {
		k.refill(b, now)
		if b.tokens >= float64(k.rate.Burst) {
			delete(k.buckets, key)
		}
	}
	if len(k.buckets) > k.maxKeys/2 {
		clear(k.buckets)
	}
}

// Len is how many keys are tracked (for tests).
func (k *Keyed[K]) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}

// ClientAddr is the key a per-address limit counts a peer under: the IP
// of a host:port (http.Request.RemoteAddr), an IPv6 address cut to its
// /64, the block one subscriber usually holds. An unparsable address is
// the zero Addr, one bucket shared by all such peers.
func ClientAddr(remoteAddr string) netip.Addr {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}
