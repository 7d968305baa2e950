// Package kinds lists every source connector this build can read; the
// binary, the JSON Schema of import files and the docs all use it.
package kinds

import (
	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/bigquery"
	"github.com/tributary-dev/tributary/connectors/duckdb"
	"github.com/tributary-dev/tributary/connectors/postgres"
	"github.com/tributary-dev/tributary/connectors/snowflake"
)

// Registry returns a registry of all source kinds.
func Registry() *connectors.Registry {
	return connectors.NewRegistry(bigquery.Kind(), duckdb.Kind(), postgres.Kind(), snowflake.Kind())
}
