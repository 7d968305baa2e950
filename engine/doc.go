// Package engine maps warehouse rows (Arrow record batches) to events,
// profiles and lookup rows and runs syncs with checkpoints. It is built in
// the mapping-engine issue; the ingest core it writes through is ingest/.
package engine
