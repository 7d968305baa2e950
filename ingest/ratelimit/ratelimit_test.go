package ratelimit

import (
	"context"
	"testing"
	"time"
)

func TestRollingWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	l := New(func() time.Time { return now })
	const limit = 100
	steps := []struct {
		advance time.Duration
		n       int64
		want    bool
	}{
		{0, 60, true},
		{10 * time.Second, 40, true},   // exactly at the limit
		{0, 1, false},                  // over: refused, charges nothing
		{49 * time.Second, 1, false},   // t=59s: the first 60 bytes still count
		{1 * time.Second, 60, true},    // t=60s: the first slot left the window
		{9 * time.Second, 1, false},    // t=69s: 40+60 still inside
		{1 * time.Second, 40, true},    // t=70s: the 40 from t=10s expired
		{2 * time.Minute, limit, true}, // idle: the whole budget is back
		{0, limit + 1, false},          // a single request larger than the budget
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := l.Allow(context.Background(), 7, s.n, limit); got != s.want {
			t.Fatalf("step %d: Allow(%d) = %v, want %v", i, s.n, got, s.want)
		}
	}
	if !l.Allow(context.Background(), 8, limit, limit) {
		t.Fatal("keys must not share a budget")
	}
}
