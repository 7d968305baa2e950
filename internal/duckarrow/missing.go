//go:build !duckdb_arrow

package duckarrow

// Tributary reads and writes Arrow record batches through DuckDB, which
// duckdb-go compiles only under a build tag. Build with `make build`, or
// `go build -tags=duckdb_arrow ./...` (`go install -tags=duckdb_arrow …`).
var _ = tributary_needs_build_tag_duckdb_arrow__build_with_make_or_go_build_tags_duckdb_arrow
