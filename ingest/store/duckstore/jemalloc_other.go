//go:build !(linux && amd64)

package duckstore

// returnFreedMemory does nothing where DuckDB's allocator is not the
// jemalloc it links on Linux (amd64 is where this was verified).
func returnFreedMemory() error { return nil }
