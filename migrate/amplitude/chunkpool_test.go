package amplitude

import (
	"testing"
	"time"
)

// The pool hands back returned chunks with their buffers, and drops its
// idle chunks keepIdle after the last came back, not while one is out.
func TestChunkPool(t *testing.T) {
	p := newChunkPool(50 * time.Millisecond)
	a, b := p.get(), p.get()
	for i := range 100 {
		a.add(Location{Line: i + 1}, benchLine(i, hour(1, 0)))
	}
	a.opt = (&loader{now: func() time.Time { return testNow }}).options()
	a.prepare()
	if len(a.batch.Events) != 100 {
		t.Fatalf("prepared %d events of 100: %+v", len(a.batch.Events), a.fails)
	}
	data, buf := cap(a.data), cap(a.buf)
	p.put(a)
	if a.len() != 0 || len(a.batch.Events) != 0 || len(a.buf) != 0 {
		t.Fatal("put did not empty the chunk")
	}
	if c := p.get(); c != a || cap(c.data) != data || cap(c.buf) != buf || data == 0 || buf == 0 {
		t.Fatal("a returned chunk was not reused with its buffers")
	}
	c := p.get() // none idle: a new one
	if c == a || c == b {
		t.Fatal("a chunk in use was handed out again")
	}
	p.put(a)
	p.put(c)
	time.Sleep(120 * time.Millisecond)
	if n := p.idle(); n != 2 {
		t.Fatalf("%d idle while a chunk is out; want 2 kept", n)
	}
	// The last put arms the drop timer; a 50ms keepIdle could fire before
	// the check below on a loaded machine, so give it a second from here.
	p.mu.Lock()
	p.keepIdle = time.Second
	p.mu.Unlock()
	p.put(b)
	if n := p.idle(); n != 3 {
		t.Fatalf("%d idle; want 3", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.idle() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d chunks still idle after keepIdle", p.idle())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c := p.get(); c == a || c == b || cap(c.data) != 0 {
		t.Fatal("after the drop the pool handed out an old chunk")
	}
}

// A fresh chunk sizes its lines and records for the whole batch once a
// few are in: a handful of allocations (doubling up to projectAfter
// lines, then one), not one per doubling and quarter all the way, and
// about an eighth beyond the batch.
func TestChunkProjects(t *testing.T) {
	c := newChunk()
	c.want = 2000
	allocs, size := 0, 0
	for i := range c.want {
		line := benchLine(i, hour(1, 0).Add(time.Duration(i)*time.Second))
		size += len(line)
		before := cap(c.data)
		c.add(Location{Line: i + 1}, line)
		if cap(c.data) != before {
			allocs++
		}
	}
	if allocs > 10 || cap(c.data) > size+size/8+size/16 {
		t.Fatalf("lines: %d allocations, capacity %d for %d bytes", allocs, cap(c.data), size)
	}
	c.opt = (&loader{now: func() time.Time { return testNow }}).options()
	c.prepare()
	if len(c.batch.Events) != c.want {
		t.Fatalf("prepared %d events of %d: %+v", len(c.batch.Events), c.want, c.fails)
	}
	if n := len(c.buf); cap(c.buf) > n+n/8+n/16 {
		t.Fatalf("records: capacity %d for %d bytes", cap(c.buf), n)
	}
}
