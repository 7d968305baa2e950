package store

import "context"

// ImportIDProperty is the event property that names the warehouse import
// an event came from (the mapper writes it on every imported event).
const ImportIDProperty = "$warehouse_import_id"

// ImportData removes what a warehouse import stored, for the app API's
// DELETE with {"delete_data": true}.
type ImportData interface {
	// DeleteImportEvents deletes project's events whose top-level
	// ImportIDProperty is the string importID, and frees their dedup
	// keys, so importing the same rows again stores them again. It
	// returns how many events it deleted. Each deletion is durable when
	// it is counted; after an error, calling it again finishes the job
	// (a second call on a finished job deletes nothing).
	DeleteImportEvents(ctx context.Context, project int64, importID string) (int64, error)
}
