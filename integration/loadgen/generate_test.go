package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestTimeOf: where each kind of run puts preloaded and measured events.
func TestTimeOf(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	const preload = 1000
	tests := []struct {
		name       string
		span, live time.Duration
		// [lo, hi] before base, in ms, of preloaded and of measured events:
		// with a live window, the preload ends where it starts
		preLo, preHi, measLo, measHi int64
		ordered                      bool // preloaded times never go back
	}{
		{"backfill", 6 * time.Hour, 0, 0, 6 * 3600e3, 0, 6 * 3600e3, false},
		{"history and live", 17520 * time.Hour, 6 * time.Hour, 6 * 3600e3, 17520 * 3600e3, 0, 6 * 3600e3, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGenerator(now, tc.span, tc.live, preload, 0)
			r := rand.New(rand.NewPCG(1, 2))
			prev := int64(-1 << 62)
			wentBack := false
			for seq := int64(0); seq < 2*preload; seq++ {
				ago := g.base - g.timeOf(r, seq)
				lo, hi := tc.measLo, tc.measHi
				if seq < preload {
					lo, hi = tc.preLo, tc.preHi
					wentBack = wentBack || -ago < prev
					prev = -ago
				}
				if ago < lo || ago > hi {
					t.Fatalf("event %d at %d ms before base, want within [%d, %d]", seq, ago, lo, hi)
				}
			}
			if tc.ordered && wentBack {
				t.Fatal("the preload's times went back")
			}
			if !tc.ordered && !wentBack {
				t.Fatal("the preload's times are in order: want random")
			}
		})
	}
}
