package lookup

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// MemoryPerByte is how many bytes of resident memory an upload costs per
// byte of CSV while it is parsed and stored. Measured on a 32 MB,
// 527k-row table under a 192 MiB Go memory limit and a 32 MB DuckDB
// limit: the parsed table holds 76 MiB of Go heap (the rows as JSON
// repeat the column names, 57 MiB; the keys and their index), and the
// embedded store's transaction adds 78-101 MiB of DuckDB memory beyond
// its own limit until COMMIT (135 MiB before duckstore flushed its
// appender every 16k rows): 4.8-5.5 bytes per byte. Uploading it to a
// server (integration TestEdgeLookupUploadsShareMemory) raised its peak
// by 245-262 MiB, since the Go heap also fills up to its limit with
// read garbage.
const MemoryPerByte = 6

// Gate bounds the memory of the uploads being parsed and stored at once.
// A table is held whole until the store has it (the replacement is one
// transaction, all or nothing), so uploads cannot stream through in
// constant memory; what the gate bounds is how many are in memory
// together. Four parallel 100 MB uploads took a server from 99 MiB to
// 1.87 GiB resident before it.
//
// Waiters are served in order (a large upload is not starved by small
// ones), and an upload larger than the whole capacity runs alone.
type Gate struct {
	capacity int64
	sem      *semaphore.Weighted
}

// NewGate returns a gate admitting uploads whose estimated memory sums to
// at most capacity bytes (≤ 0: one upload of DefaultMaxBytes).
func NewGate(capacity int64) *Gate {
	if capacity <= 0 {
		capacity = MemoryPerByte * DefaultMaxBytes
	}
	return &Gate{capacity: capacity, sem: semaphore.NewWeighted(capacity)}
}

// Capacity is the memory the gate admits at once.
func (g *Gate) Capacity() int64 { return g.capacity }

// Enter waits until an upload of size bytes of CSV (uncompressed; -1 when
// unknown, which counts as DefaultMaxBytes) may proceed, or ctx ends.
// The caller calls release when the table is stored or dropped.
func (g *Gate) Enter(ctx context.Context, size int64) (release func(), err error) {
	if size < 0 || size > DefaultMaxBytes {
		size = DefaultMaxBytes
	}
	w := min(max(MemoryPerByte*size, 1), g.capacity)
	if err := g.sem.Acquire(ctx, w); err != nil {
		return nil, err
	}
	return func() { g.sem.Release(w) }, nil
}
