// Package connectors holds the warehouse source adapters (DuckDB, Postgres,
// Snowflake, BigQuery) that stream table rows as Arrow record batches.
// They arrive with the connector issues.
package connectors
