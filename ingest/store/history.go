package store

import "context"

// A History table (import_type people or groups with history:) is an
// SCD-2 table: one row per profile per version, each version valid from
// its start time until the next version's start. The store keeps every
// version an import read, keyed by (group key, profile id, start time),
// so a run can re-derive the version current now after an insert, an
// update or a delete, and reads can ask which version held at an
// event's time. A run writes a batch's versions before the Mirror state
// rows that cover them (store.Mirrors); writing a version again is
// harmless, so a crash in between makes the next run repeat the write
// instead of losing it (engine/run/history.go).

// HistoryVersion is one version of a profile in a History table.
type HistoryVersion struct {
	GroupKey string // "" for a user profile
	ID       string // the distinct_id, or the group id
	StartMs  int64  // start of validity, ms since the epoch
	// Props is the version's non-NULL properties as a compact JSON
	// object ("{}" when none). Ignored by deletes.
	Props []byte
}

// Histories keeps History tables' versions.
type Histories interface {
	// HistoryApply deletes del and upserts put (by group key, id and
	// start) in one transaction, fenced by runID as a run's writes are
	// (store.ErrRunEnded once the run was taken over; "" is not fenced).
	HistoryApply(ctx context.Context, project int64, importID, runID string, put, del []HistoryVersion) error
	// HistoryAsOf calls fn, for each of ids (profiles of groupKey) that
	// has a version of the import with start ≤ atMs, with the latest
	// such version (in no particular order).
	HistoryAsOf(ctx context.Context, project int64, importID, groupKey string, ids []string, atMs int64, fn func(HistoryVersion) error) error
	// HistoryProfile calls fn for every version of the profile across the
	// project's History imports, ordered by import, then start.
	HistoryProfile(ctx context.Context, project int64, groupKey, id string, fn func(importID string, v HistoryVersion) error) error
	// HistoryDrop forgets the import's versions.
	HistoryDrop(ctx context.Context, project int64, importID string) error
}
