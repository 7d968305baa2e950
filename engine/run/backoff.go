package run

import (
	"math/rand/v2"
	"time"
)

// Backoff paces retries of transient source errors (a reset connection, a
// timeout, a 5xx): exponential with full jitter, so several imports that
// lost the same warehouse do not reconnect in lockstep.
type Backoff struct {
	Attempts int           // tries in all, the first included; 0 = 8
	Base     time.Duration // first delay's ceiling; 0 = 500ms
	Max      time.Duration // ceiling of any delay; 0 = 30s
}

func (b Backoff) withDefaults() Backoff {
	if b.Attempts <= 0 {
		b.Attempts = 8
	}
	if b.Base <= 0 {
		b.Base = 500 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 30 * time.Second
	}
	return b
}

// delay before retry number attempt (0-based): uniform in [d/2, d] with
// d = min(Max, Base·2^attempt).
func (b Backoff) delay(attempt int) time.Duration {
	d := b.Max
	if attempt < 30 {
		d = min(b.Max, b.Base<<attempt)
	}
	return d/2 + rand.N(d/2+1)
}
