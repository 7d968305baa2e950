package lookup

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// UploadMemory is the resident memory one upload in flight is reserved,
// whatever its size: an upload streams into the store a Batch at a time
// (lookup.BatchRows rows, at most about BatchBytes of JSON), so its cost
// is the batch, the CSV reader's buffers and the store's appender, not
// the table. Measured by integration TestEdgeLookupUploadMemoryBounded.
const UploadMemory = 48 << 20

// DefaultGateUploads is how many uploads a gate without a capacity admits.
const DefaultGateUploads = 4

// Gate bounds the memory of the uploads being parsed and stored at once
// by admitting capacity / UploadMemory of them. Before uploads streamed,
// four parallel 100 MB uploads took a server from 99 MiB to 1.87 GiB
// resident; streaming bounds each, the gate bounds how many.
//
// Waiters are served in order, and a capacity below one reservation still
// admits one upload at a time.
type Gate struct {
	capacity int64
	sem      *semaphore.Weighted
}

// NewGate returns a gate admitting uploads whose reservations sum to at
// most capacity bytes (≤ 0: DefaultGateUploads uploads).
func NewGate(capacity int64) *Gate {
	if capacity <= 0 {
		capacity = DefaultGateUploads * UploadMemory
	}
	return &Gate{capacity: capacity, sem: semaphore.NewWeighted(capacity)}
}

// Capacity is the memory the gate admits at once.
func (g *Gate) Capacity() int64 { return g.capacity }

// Enter waits until one more upload may proceed, or ctx ends. The caller
// calls release when the upload is stored or refused.
func (g *Gate) Enter(ctx context.Context) (release func(), err error) {
	w := min(UploadMemory, g.capacity)
	if err := g.sem.Acquire(ctx, w); err != nil {
		return nil, err
	}
	return func() { g.sem.Release(w) }, nil
}
