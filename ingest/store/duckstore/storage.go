package duckstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
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

// attachedName is the catalog name of the store's file in its DuckDB
// instance; every connection makes it the default (USE), so queries name
// tables alone.
const attachedName = "store"

// connect returns a connector for the file at path, with the instance's
// settings in cfg. The instance itself is in memory and each connection
// attaches the file (once per instance: IF NOT EXISTS) and uses it:
// ROW_GROUP_SIZE and STORAGE_VERSION are options of ATTACH only, not
// settings of an instance opened on the file. Temporary files stay
// beside the database, where an instance opened on it puts them.
func connect(path string, cfg url.Values, fresh bool, rowGroupRows int) (*duckdb.Connector, error) {
	cfg = maps.Clone(cfg)
	cfg.Set("temp_directory", path+".tmp")
	var opts []string
	if fresh {
		opts = append(opts, "STORAGE_VERSION '"+storageVersion+"'")
	}
	if rowGroupRows > 0 {
		opts = append(opts, "ROW_GROUP_SIZE "+strconv.Itoa(rowGroupRows))
	}
	attach := "ATTACH IF NOT EXISTS '" + strings.ReplaceAll(path, "'", "''") + "' AS " + attachedName
	if len(opts) > 0 {
		attach += " (" + strings.Join(opts, ", ") + ")"
	}
	return duckdb.NewConnector(":memory:?"+cfg.Encode(), func(ex driver.ExecerContext) error {
		for _, q := range []string{attach, "USE " + attachedName} {
			if _, err := ex.ExecContext(context.Background(), q, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
