package lookup

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	ctx := context.Background()
	g := NewGate(2*UploadMemory + UploadMemory/2) // room for two uploads
	entered := func(g *Gate) chan func() {
		ch := make(chan func(), 1)
		go func() {
			if rel, err := g.Enter(ctx); err == nil {
				ch <- rel
			}
		}()
		return ch
	}
	waiting := func(ch chan func()) bool {
		select {
		case <-ch:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	a, err := g.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	third := entered(g)
	if !waiting(third) {
		t.Fatal("a third upload entered a gate with room for two")
	}
	a()
	(<-third)()
	b()

	// A capacity below one reservation still admits one upload at a time;
	// a cancelled wait ends.
	small := NewGate(1)
	rel, err := small.Enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := small.Enter(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	rel()
	if NewGate(0).Capacity() != DefaultGateUploads*UploadMemory {
		t.Fatal("default capacity")
	}
}
