package store

import "context"

// A Mirror import keeps things outside its own records: its state in the
// store and, on Postgres, a replication slot and publication in the
// warehouse (a forgotten slot retains WAL forever). An import deleted
// through the app API drops them; one whose file left imports_dir is
// only noticed at the next start, when the file (and so its source) is
// gone. So each Mirror run notes what its source was (MirrorSource), and
// the start drops what the imports no longer listed kept.

// MirrorSource is what a Mirror import's source was.
type MirrorSource struct {
	Project int64
	Import  string
	// Source is the caller's description of the source (JSON, never
	// secrets: engine/run decides what it holds).
	Source []byte
}

// MirrorSources keeps the sources of Mirror imports.
type MirrorSources interface {
	// MirrorNoteSource records (or replaces) an import's source.
	MirrorNoteSource(ctx context.Context, s MirrorSource) error
	// MirrorSources returns every recorded source, in project and import order.
	MirrorSources(ctx context.Context) ([]MirrorSource, error)
	// MirrorForgetSource forgets an import's source (once what it kept
	// is dropped); forgetting an unknown one is not an error.
	MirrorForgetSource(ctx context.Context, project int64, importID string) error
}
