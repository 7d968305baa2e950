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

// Registry returns a registry of all source kinds with no options: no
// allowed_paths, nothing logged (tests, schema generation).
func Registry() *connectors.Registry { return RegistryWith(connectors.Options{}) }

// RegistryWith returns a registry of all source kinds under opts, the
// operator's limits (server.SourceOptions builds them).
func RegistryWith(opts connectors.Options) *connectors.Registry {
	ks := []connectors.Kind{bigquery.Kind(), duckdb.KindWith(opts), postgres.KindWith(opts), snowflake.Kind()}
	for i := range ks {
		ks[i] = connectors.GuardPaths(ks[i], opts)
	}
	return connectors.NewRegistry(ks...)
}
