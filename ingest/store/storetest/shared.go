package storetest

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
)

// testSharedTokens: tokens are found by hash with their account and
// expiry, survive a restart (another process may hold them), and expired
// ones are purged by a later PutToken.
func testSharedTokens(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	a, b := sha256.Sum256([]byte("token-a")), sha256.Sum256([]byte("token-b"))
	if err := hd.s.PutToken(ctx, a, "alice", 1_000, 0); err != nil {
		t.Fatalf("put a: %v", err)
	}
	if _, _, ok, err := hd.s.Token(ctx, b); err != nil || ok {
		t.Fatalf("unknown token: ok=%v err=%v, want not found", ok, err)
	}
	hd.reopen(t)
	acc, exp, ok, err := hd.s.Token(ctx, a)
	if err != nil || !ok || acc != "alice" || exp != 1_000 {
		t.Fatalf("token a after reopen = %q, %d, %v, %v; want alice, 1000, true", acc, exp, ok, err)
	}
	// Issuing b at a time after a expired purges a.
	if err := hd.s.PutToken(ctx, b, "bob", 5_000, 2_000); err != nil {
		t.Fatalf("put b: %v", err)
	}
	if _, _, ok, err := hd.s.Token(ctx, a); err != nil || ok {
		t.Fatalf("expired token a: ok=%v err=%v, want purged", ok, err)
	}
	acc, exp, ok, err = hd.s.Token(ctx, b)
	if err != nil || !ok || acc != "bob" || exp != 5_000 {
		t.Fatalf("token b = %q, %d, %v, %v; want bob, 5000, true", acc, exp, ok, err)
	}
}

// testSharedRate: counters add per (project, minute) and concurrent
// additions are never lost, each caller seeing a distinct total.
func testSharedRate(t *testing.T, h Harness) {
	hd := open(t, h)
	ctx := context.Background()
	add := func(project, minute, n int64) int64 {
		t.Helper()
		total, err := hd.s.AddRate(ctx, project, minute, n)
		if err != nil {
			t.Fatalf("add rate(%d, %d, %d): %v", project, minute, n, err)
		}
		return total
	}
	if got := add(1, 100, 10); got != 10 {
		t.Fatalf("first add = %d, want 10", got)
	}
	if got := add(1, 100, 5); got != 15 {
		t.Fatalf("second add = %d, want 15", got)
	}
	if got := add(2, 100, 7); got != 7 {
		t.Fatalf("another project = %d, want 7", got)
	}
	if got := add(1, 101, 3); got != 3 {
		t.Fatalf("next minute = %d, want 3", got)
	}
	const workers, each = 8, 10
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				total, err := hd.s.AddRate(ctx, 3, 200, 1)
				if err != nil {
					t.Errorf("concurrent add: %v", err)
					return
				}
				mu.Lock()
				seen[total] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != workers*each {
		t.Fatalf("concurrent adds saw %d distinct totals, want %d", len(seen), workers*each)
	}
	if got := add(3, 200, 0); got != workers*each {
		t.Fatalf("total after concurrent adds = %d, want %d", got, workers*each)
	}
}
