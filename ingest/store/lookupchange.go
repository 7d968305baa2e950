package store

import "context"

// LookupChanges applies a change set to a lookup table in place: what a
// Mirror sync (sync_mode: mirror) found changed and deleted, where
// Lookups.ReplaceLookup would rewrite every row for one changed row.
type LookupChanges interface {
	// ChangeLookup upserts rows' rows by key and deletes the keys in del
	// (absent ones are ignored), all in one transaction, durable on
	// return: readers see the table before or after, never a mix. A
	// missing table is created; the table's columns become
	// rows.Columns(). rows' keys must be unique and none may be in del.
	ChangeLookup(ctx context.Context, project int64, id string, rows LookupRows, del []string) error
}
