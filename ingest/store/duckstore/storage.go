package duckstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// storageVersion is DuckDB's storage format for files this build creates.
// v1.2.0 is the first that compresses strings with ZSTD and still writes
// FSST and dictionary segments (v1.3.0 replaced both with DICT_FSST), so
// the events table of files made before (the library's default format,
// v0.10.2, whose FSST columns cannot become ZSTD) keeps working as it was.
// Files keep the format they were created with; DuckDB 1.2 and later read
// both.
const storageVersion = "v1.2.0"

// eventsTable is the events table of files created at storageVersion.
// The loader's cost is mostly DuckDB compressing the long, nearly unique
// JSON of props at each checkpoint; ZSTD does that in less CPU than FSST and
// finds the keys repeated from row to row, which FSST's 8-byte symbols
// cannot (measured with BenchmarkLoad: loader CPU per event 2.5 → 1.9 µs,
// file 85 → 53 bytes per event). Naming every string column's method also
// skips DuckDB's analysis of all candidates at each checkpoint: names are
// few (a dictionary), distinct ids short and repetitive (FSST).
const eventsTable = `CREATE TABLE IF NOT EXISTS events (
	project BIGINT NOT NULL, name VARCHAR NOT NULL USING COMPRESSION dictionary,
	distinct_id VARCHAR NOT NULL USING COMPRESSION fsst,
	time_ms BIGINT NOT NULL, insert_id VARCHAR USING COMPRESSION zstd,
	props VARCHAR NOT NULL USING COMPRESSION zstd,
	ingest_ms BIGINT NOT NULL, seq BIGINT NOT NULL, k_hi BIGINT, k_lo BIGINT)`

// isNewFile reports whether path does not exist yet: only then may Open
// choose the storage format.
func isNewFile(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	default:
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
}
