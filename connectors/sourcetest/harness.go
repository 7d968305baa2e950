// Package sourcetest is the conformance suite of connectors.Source: what
// every warehouse connector must do, checked the same way for each. A
// connector's test supplies a Harness that creates fixture tables in a real
// (or wire-compatible) warehouse; the suite never depends on a dialect.
package sourcetest

import (
	"testing"

	"github.com/tributary-dev/tributary/connectors"
)

// Type is a logical column type of a fixture table. Each harness maps it
// to its warehouse's type (BIGINT, NUMBER(38,0), INT64, …).
type Type int

const (
	Int64 Type = iota
	Int32
	Float64
	Bool
	String
	Timestamp   // without time zone; values are UTC
	TimestampTZ // with time zone
	Date
	Decimal // precision 12, scale 2
	JSON
	Bytes
	ListInt64
)

// ColumnDef is one column of a fixture table.
type ColumnDef struct {
	Name       string
	Type       Type
	NotNull    bool
	PrimaryKey bool
}

// Fixture is one test's isolated database (or schema) and a source over it.
type Fixture interface {
	Source() connectors.Source
	// Create makes a table and inserts rows given in the canonical forms
	// Canon returns (int64, float64, bool, string, time.Time, "YYYY-MM-DD"
	// for dates, "12.34" for decimals, JSON text, []byte, []int64, nil).
	Create(t *testing.T, name string, cols []ColumnDef, rows [][]any)
	// CreateSeries makes table name with n rows generated inside the
	// warehouse: id BIGINT NOT NULL PRIMARY KEY (0..n-1), ts TIMESTAMP NOT
	// NULL (2026-01-01 00:00:00 UTC plus id seconds), name VARCHAR ("row-"
	// || id), amount DOUBLE (id / 4.0).
	CreateSeries(t *testing.T, name string, n int64)
	// Table is how a ReadRequest names a created table.
	Table(name string) connectors.Table
}

// Harness describes a connector under test.
type Harness struct {
	// Open returns a fresh fixture; cleanup is registered on t.
	Open func(t *testing.T) Fixture
	// Unsupported types are left out of the type matrix (say why in the
	// harness, e.g. a warehouse without list columns).
	Unsupported []Type
	// StreamRows is the size of the bounded-memory stream (default 3 M;
	// -short runs use a tenth).
	StreamRows int64
	// AfterCancel, when set, checks the warehouse after a cancelled read
	// (e.g. that no query is still running in pg_stat_activity).
	AfterCancel func(t *testing.T, f Fixture)
}

func (h Harness) supports(ty Type) bool {
	for _, u := range h.Unsupported {
		if u == ty {
			return false
		}
	}
	return true
}
