// Package ratelimit enforces per-project byte budgets on a rolling window,
// the way the public API limits ingestion (2 GB of uncompressed JSON per
// rolling minute). Memory per project is fixed: one counter per second.
//
// Several processes on one store share the budget (NewShared): each keeps
// its rolling window and also reserves bytes in chunks from a per-minute
// counter in the store, so the common request makes no round trip.
package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

const slots = 60 // one-second slots across the one-minute window

// Limiter tracks usage per key. The zero value is not usable; use New.
type Limiter struct {
	now func() time.Time

	mu   sync.Mutex
	keys map[int64]*window

	// counter, when set, holds the budget all processes share (shared.go).
	counter Counter
	shared  grants
	log     *slog.Logger
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

// NewShared returns a limiter whose budget also holds across every process
// that uses the same counter: within a calendar minute (the counter's
// unit) the bytes all of them accept sum to at most the limit. log, when
// not nil, hears of counter failures.
func NewShared(now func() time.Time, c Counter, log *slog.Logger) *Limiter {
	l := New(now)
	l.counter, l.shared.m, l.log = c, map[int64]*grant{}, log
	if l.log == nil {
		l.log = discardLogger
	}
	return l
}

// Allow charges n bytes to key when the rolling minute's total stays within
// limit (and, for a shared limiter, the minute's shared budget has room)
// and reports whether it did. A refused request charges nothing, so a
// client that backs off regains its budget as the window rolls on.
func (l *Limiter) Allow(ctx context.Context, key int64, n, limit int64) bool {
	now := l.now()
	if l.counter == nil {
		return l.allowLocal(now.Unix(), key, n, limit)
	}
	minute := now.Unix() / 60
	if n > limit || !l.take(ctx, key, n, limit, minute) {
		return false
	}
	if !l.allowLocal(now.Unix(), key, n, limit) {
		l.refund(key, n, minute)
		return false
	}
	return true
}

// allowLocal is the rolling window of this process.
func (l *Limiter) allowLocal(s, key, n, limit int64) bool {
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
