package store

import (
	"context"
	"encoding/binary"
)

// A Mirror sync (sync_mode: mirror) reflects a table's inserts, updates
// and deletes. Per import the store keeps the table's previous state as
// one MirrorRow per primary key: the hash of the row and a reference to
// the record it produced. A run looks up each batch of rows it reads
// (MirrorLookup), records what changed (MirrorApply) and writes the new
// records through Write; at the end the rows it never saw are the
// table's deletes (MirrorUnseen).
//
// MirrorApply and the Write of the records it announces are two
// transactions, so a row is first recorded as pending (MirrorPending,
// MirrorDeleting) and only MirrorSettle, after every write of the run,
// marks it done. A run that dies in between leaves pending rows, which
// the next run treats as changed and applies again: replacing an event
// deletes whatever the key's Ref names before writing it again, and
// profile updates are idempotent. So a crash anywhere neither loses a
// change nor applies one twice.

// MirrorFlag says whether a mirror row's change is known to be applied.
type MirrorFlag uint8

const (
	// MirrorSettled: the row's records are written.
	MirrorSettled MirrorFlag = 0
	// MirrorPending: the row was recorded; its records may not be written yet.
	MirrorPending MirrorFlag = 1
	// MirrorDeleting: the row left the table; its records may not be removed yet.
	MirrorDeleting MirrorFlag = 2
)

// MirrorRow is one key of an import's mirrored table.
type MirrorRow struct {
	Key  []byte // the encoded key columns (or the whole row without a key)
	Hash []byte // the row hash
	// Ref names the record the row produced: an event's EventRef
	// (empty when the row was refused), a profile's id, a lookup key.
	Ref  []byte
	Flag MirrorFlag
}

// MirrorApply is what one MirrorApply call commits, in one transaction.
type MirrorApply struct {
	Project int64
	Import  string
	// RunID fences the apply as Batch.RunID fences a write.
	RunID string
	// Gen marks the upserted rows seen (see MirrorLookup).
	Gen int64
	// Rows are upserted by Key as given.
	Rows []MirrorRow
	// Remove deletes these keys' rows (a settled delete needs no tombstone).
	Remove [][]byte
	// DeleteEvents are the dedup keys of events to delete: the versions
	// the changes replace or remove. Their keys leave the dedup set, so
	// the new versions (which may share the key) are stored.
	DeleteEvents []EventRef
	// Replaced, when set, is how many keys of Rows and Remove have a
	// state row already (the caller looked them up): a store that keeps
	// versions counts that many rows superseded without reading its state
	// again. Nil: the store finds out itself.
	Replaced *int64
}

// EventRef locates one stored event: its dedup key and time.
type EventRef struct {
	Key    Key
	TimeMs int64
}

// Bytes encodes r as a MirrorRow.Ref.
func (r EventRef) Bytes() []byte {
	b := make([]byte, 24)
	copy(b, r.Key[:])
	binary.BigEndian.PutUint64(b[16:], uint64(r.TimeMs))
	return b
}

// ParseEventRef decodes a MirrorRow.Ref made by Bytes; ok is false for
// an empty (refused row) or malformed one.
func ParseEventRef(b []byte) (r EventRef, ok bool) {
	if len(b) != 24 {
		return r, false
	}
	copy(r.Key[:], b)
	r.TimeMs = int64(binary.BigEndian.Uint64(b[16:]))
	return r, true
}

// Mirrors keeps Mirror syncs' table states.
type Mirrors interface {
	// MirrorLookup calls fn for each of keys the import's state holds
	// (in no particular order) and, when gen > 0, marks them seen by gen.
	// gen 0 only reads (a preview).
	MirrorLookup(ctx context.Context, project int64, importID string, gen int64, keys [][]byte, fn func(MirrorRow) error) error
	// MirrorApply commits a's changes atomically. ctx bounds the waits
	// before the change (a run that ends is not held); a change begun is
	// let finish.
	MirrorApply(ctx context.Context, a MirrorApply) error
	// MirrorUnseen calls fn, in key order and a page at a time (memory
	// does not grow with the table), for the rows not seen by gen: keys
	// the table no longer holds, and deletes a crash left pending. fn may
	// call MirrorApply.
	MirrorUnseen(ctx context.Context, project int64, importID string, gen int64, fn func(MirrorRow) error) error
	// MirrorSettle marks every pending row settled and forgets deleted ones.
	MirrorSettle(ctx context.Context, project int64, importID, runID string) error
	// MirrorCount returns how many keys the state holds (deleted excluded).
	MirrorCount(ctx context.Context, project int64, importID string) (int64, error)
	// MirrorDrop forgets the import's state (the import was deleted or
	// its data reset): the next run sees every row as new.
	MirrorDrop(ctx context.Context, project int64, importID string) error
	// MirrorRecordRun saves a Mirror run's counts (replacing earlier ones
	// of the same run) for its history.
	MirrorRecordRun(ctx context.Context, project int64, runID string, c MirrorCounts) error
	// MirrorRunCounts returns the saved counts of those of runIDs that
	// have them.
	MirrorRunCounts(ctx context.Context, project int64, runIDs []string) (map[string]MirrorCounts, error)
}

// MirrorCounts are a Mirror run's rows by what they did.
type MirrorCounts struct {
	Inserted, Updated, Deleted, Unchanged int64
	// Rows is the table's rows after the run (the keys its state holds),
	// whether the run read the table or a change feed's changes: what the
	// volume rule compares Mirror runs by. -1: the run could not tell; 0
	// in runs saved before it was recorded.
	Rows int64
}
