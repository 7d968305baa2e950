package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

func testPing(t *testing.T, h Harness) {
	hd := open(t, h)
	if err := hd.s.Ping(context.Background()); err != nil {
		t.Fatalf("ping on an open store: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := hd.s.Ping(ctx); err == nil {
		t.Fatal("ping with a cancelled context succeeded")
	}
}

func testClosed(t *testing.T, h Harness) {
	hd := open(t, h)
	mustWrite(t, hd.s, store.Batch{Project: 1, Events: GenEvents(1, 3, 0)})
	if err := hd.s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := hd.s.Close(); err != nil {
		t.Fatalf("second close must be a no-op, got %v", err)
	}
	ctx := context.Background()
	_, err := hd.s.Write(ctx, []store.Batch{{Project: 1, Events: GenEvents(1, 3, 100)}})
	if !errors.Is(err, store.ErrClosed) {
		t.Errorf("write after close: %v, want ErrClosed", err)
	}
	// Even a write with nothing to store must refuse: callers use it to probe.
	if _, err := hd.s.Write(ctx, nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("empty write after close: %v, want ErrClosed", err)
	}
	called := false
	err = hd.s.ScanEvents(ctx, all(1), func(*store.Event) error { called = true; return nil })
	if !errors.Is(err, store.ErrClosed) || called {
		t.Errorf("scan after close: err %v, fn called %v; want ErrClosed and no call", err, called)
	}
	if err := hd.s.Ping(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("ping after close: %v, want ErrClosed", err)
	}
	// The data written before Close is still there for the next process.
	hd.reopen(t)
	if n := len(Collect(t, hd.s, all(1))); n != 3 {
		t.Fatalf("after reopen: %d events, want 3", n)
	}
}
