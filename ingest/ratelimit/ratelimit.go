// Package ratelimit enforces per-project byte budgets on a rolling window,
// the way the public API limits ingestion (2 GB of uncompressed JSON per
// rolling minute). Memory per project is fixed: one counter per second.
package ratelimit

import (
	"sync"
	"time"
)

const slots = 60 // one-second slots across the one-minute window

// Limiter tracks usage per key. The zero value is not usable; use New.
type Limiter struct {
	now func() time.Time

	mu   sync.Mutex
	keys map[int64]*window
}

type window struct {
	sec   [slots]int64 // unix second each slot currently counts
	bytes [slots]int64
}

// New returns a limiter reading time from now (time.Now when nil).
func New(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, keys: map[int64]*window{}}
}

// Allow charges n bytes to key when the rolling minute's total stays within
// limit and reports whether it did. A refused request charges nothing, so a
// client that backs off regains its budget as the window rolls on.
func (l *Limiter) Allow(key int64, n, limit int64) bool {
	s := l.now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.keys[key]
	if w == nil {
		w = &window{}
		l.keys[key] = w
	}
	var used int64
	for i := range w.sec {
		if s-w.sec[i] < slots {
			used += w.bytes[i]
		}
	}
	if used+n > limit {
		return false
	}
	i := s % slots
	if w.sec[i] != s {
		w.sec[i], w.bytes[i] = s, 0
	}
	w.bytes[i] += n
	return true
}
