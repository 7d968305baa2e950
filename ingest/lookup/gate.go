package lookup

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// UploadMemory is the resident memory one upload in flight is reserved,
// whatever its size. An upload streams into the store a Batch at a time
// (BatchRows rows, at most about BatchBytes of JSON): its Go heap peaked
// at 11 MiB for a 32 MB and a 99 MB table alike. The embedded store's
// open transaction costs more, beyond DuckDB's own memory limit: about
// 90 MiB plus a third of a byte per CSV byte. A server (memory_limit
// 256MB; integration TestEdgeLookupUploadMemoryBounded) grew by 111 MiB
// for 32 MB and 132 MiB for 99 MB, against 237 and 473 MiB when the table
// was held whole. The size limit (DefaultMaxBytes) caps the growing part,
// so one reservation covers the largest upload.
const UploadMemory = 128 << 20

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
