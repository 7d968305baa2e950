package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/ingest/store"
)

// store.Syncs arrived in the interface while this package was being
// written; until it is implemented here every method refuses, and so does a
// Write carrying a Batch.Checkpoint: dropping a checkpoint silently would
// let a sync resume from the wrong place.

var errSyncsUnsupported = fmt.Errorf("pgstore: warehouse sync state is not implemented yet: %w", errors.ErrUnsupported)

// Checkpoint implements store.Syncs (not yet).
func (s *Store) Checkpoint(context.Context, int64, string) ([]byte, error) {
	return nil, errSyncsUnsupported
}

// StartRun implements store.Syncs (not yet).
func (s *Store) StartRun(context.Context, store.RunStart) (store.Run, bool, error) {
	return store.Run{}, false, errSyncsUnsupported
}

// UpdateRun implements store.Syncs (not yet).
func (s *Store) UpdateRun(context.Context, store.Run) error { return errSyncsUnsupported }

// Runs implements store.Syncs (not yet).
func (s *Store) Runs(context.Context, store.RunFilter) ([]store.Run, error) {
	return nil, errSyncsUnsupported
}

// InterruptRuns implements store.Syncs (not yet).
func (s *Store) InterruptRuns(context.Context, string, int64) (int, error) {
	return 0, errSyncsUnsupported
}

// PutImportDoc implements store.Syncs (not yet).
func (s *Store) PutImportDoc(context.Context, store.ImportDoc) error { return errSyncsUnsupported }

// ImportDocs implements store.Syncs (not yet).
func (s *Store) ImportDocs(context.Context) ([]store.ImportDoc, error) {
	return nil, errSyncsUnsupported
}
