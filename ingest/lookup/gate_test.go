package lookup

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	g := NewGate(300)
	ctx := context.Background()
	entered := func(size int64) (chan func(), context.CancelFunc) {
		c, cancel := context.WithCancel(ctx)
		ch := make(chan func(), 1)
		go func() {
			rel, err := g.Enter(c, size)
			if err == nil {
				ch <- rel
			}
		}()
		return ch, cancel
	}
	waiting := func(ch chan func()) bool {
		select {
		case <-ch:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	// Two small uploads share the capacity (MemoryPerByte × 20 each, 240 of 300).
	a, err := g.Enter(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Enter(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	// A large one (clamped to the whole capacity) waits for both...
	big, _ := entered(1000)
	if !waiting(big) {
		t.Fatal("a large upload entered beside two others")
	}
	// ...and a small one queued after it waits behind it, not past it.
	small, _ := entered(1)
	a()
	if !waiting(small) {
		t.Fatal("a small upload overtook the large one waiting before it")
	}
	b()
	relBig := <-big
	if !waiting(small) {
		t.Fatal("a small upload entered beside one that takes the whole capacity")
	}
	relBig()
	(<-small)()

	// An unknown size counts as the largest table; a cancelled wait ends.
	rel, err := g.Enter(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.Enter(c, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	rel()
	if g.Capacity() != 300 || NewGate(0).Capacity() != MemoryPerByte*DefaultMaxBytes {
		t.Fatal("capacity")
	}
}
