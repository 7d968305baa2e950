// Package arrowmem recycles the buffers of Arrow record batches.
package arrowmem

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Pool is a memory.Allocator that keeps freed buffers for reuse, by
// power-of-two size class. A connector that builds one record batch after
// another asks for the same sizes every time; from Go's allocator each
// batch's buffers became garbage (half the bytes a sync allocated), and
// the collector ran several times a second to reclaim them.
//
// A buffer must not be referenced once the record holding it is
// released: Arrow's string accessors alias their buffer, so a string kept
// past Release would change when the buffer is handed out again (copy it,
// e.g. with strings.Clone). The zero Pool is ready; it is safe for
// concurrent use.
type Pool struct {
	mu   sync.Mutex
	free [classes][][]byte
}

var _ memory.Allocator = (*Pool)(nil)

const (
	minShift = 6  // 64 bytes, Arrow's alignment: Go places objects of a power-of-two size at multiples of it
	classes  = 25 // up to 1 GiB; larger buffers are not kept
	// maxFree buffers are kept per class: a batch has a few per column,
	// and a pipeline holds a few batches.
	maxFree = 64
)

// class returns the smallest class holding size bytes (classes if none).
func class(size int) int {
	if size <= 1<<minShift {
		return 0
	}
	return min(bits.Len(uint(size-1))-minShift, classes)
}

// Allocate returns size zeroed bytes, with a power-of-two capacity.
func (p *Pool) Allocate(size int) []byte {
	c := class(size)
	if c == classes {
		return make([]byte, size)
	}
	p.mu.Lock()
	if n := len(p.free[c]); n > 0 {
		b := p.free[c][n-1]
		p.free[c][n-1] = nil
		p.free[c] = p.free[c][:n-1]
		p.mu.Unlock()
		b = b[:size]
		clear(b)
		return b
	}
	p.mu.Unlock()
	return make([]byte, size, 1<<(c+minShift))
}

// Reallocate resizes b, moving it to a larger buffer (and freeing it) when
// its capacity is short; bytes past b's length come back zeroed.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		if size > len(b) {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free keeps b for reuse when it came from Allocate (its capacity is a
// class size) and its class is not full.
func (p *Pool) Free(b []byte) {
	c := class(cap(b))
	if c == classes || cap(b) != 1<<(c+minShift) {
		return
	}
	p.mu.Lock()
	if len(p.free[c]) < maxFree {
		p.free[c] = append(p.free[c], b[:0])
	}
	p.mu.Unlock()
}
