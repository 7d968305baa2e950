//go:build duckdb_arrow

// Package duckarrow is the one door to duckdb-go's Arrow interface (record
// batches in and out of DuckDB), which duckdb-go compiles only under the
// build tag duckdb_arrow. Every package that needs it goes through here,
// so a build without the tag fails in this package alone, with a message
// naming the tag (missing.go), instead of with undefined names in four.
package duckarrow

import (
	"database/sql/driver"

	"github.com/duckdb/duckdb-go/v2"
)

// Arrow is a connection's Arrow interface.
type Arrow = duckdb.Arrow

// New returns the Arrow interface of a DuckDB driver connection.
func New(conn driver.Conn) (*Arrow, error) { return duckdb.NewArrowFromConn(conn) }
