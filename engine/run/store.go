package run

import (
	"context"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Store is what a run needs of a store.Store: writes (records, profile
// updates, the checkpoint with them), the committed checkpoint, a lookup
// table's replacement, and the ownership bookkeeping of people and groups
// imports. Declared here so the run's dependency on the store is these
// six methods, not the whole interface.
type Store interface {
	Write(ctx context.Context, batches []store.Batch) (store.WriteResult, error)
	Checkpoint(ctx context.Context, project int64, importID string) ([]byte, error)
	ReplaceLookup(ctx context.Context, project int64, id string, rows store.LookupRows) error
	store.Members
}
