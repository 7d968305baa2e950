// Package connectors defines the seam every warehouse source implements
// (Source) and the shared pieces they reuse: source kinds with their
// connection-field specs, and SQL generation for incremental reads.
//
// A source streams Apache Arrow record batches: columnar from the warehouse
// to the mapping engine, so no connector converts rows into Go values.
// The conformance suite in connectors/sourcetest is what "implements Source"
// means; every connector runs it unchanged.
package connectors
