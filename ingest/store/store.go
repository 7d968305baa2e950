// Package store defines where accepted records live. Every implementation
// (the embedded DuckDB store now, Postgres later) must pass the conformance
// suite in package storetest unchanged, so the rules that readers rely on
// (exact dedup, durability on return, ordered scans) are stated once, here.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
)

// Key identifies an event for deduplication: a 128-bit digest of
// (project, event, distinct_id, time in ms, $insert_id). 128 bits keep the
// collision odds negligible at billions of events without storing the strings twice.
type Key [16]byte

// DedupKey derives the dedup key. Fields are length-prefixed so that
// ("ab","c") and ("a","bc") never collide.
func DedupKey(project int64, event, distinctID string, timeMs int64, insertID string) Key {
	var buf [256]byte
	b := buf[:0]
	b = binary.BigEndian.AppendUint64(b, uint64(project))
	b = binary.BigEndian.AppendUint32(b, uint32(len(event)))
	b = append(b, event...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(distinctID)))
	b = append(b, distinctID...)
	b = binary.BigEndian.AppendUint64(b, uint64(timeMs))
	b = binary.BigEndian.AppendUint32(b, uint32(len(insertID)))
	b = append(b, insertID...)
	sum := sha256.Sum256(b)
	var k Key
	copy(k[:], sum[:16])
	return k
}

// Event is one validated event ready to store.
type Event struct {
	Name       string
	DistinctID string
	TimeMs     int64  // event time, milliseconds since the epoch
	InsertID   string // empty: the event is never deduplicated
	// Props is a JSON object holding every property except time,
	// distinct_id and $insert_id (those live in the fields above). Never empty: "{}" at least.
	Props    []byte
	IngestMs int64 // when the server accepted it (exported as mp_processing_time_ms)
	Key      Key   // DedupKey of the fields above; meaningful only when InsertID != ""
}

// Dedupable reports whether the event takes part in deduplication.
func (e *Event) Dedupable() bool { return e.InsertID != "" }

// Merge is a validated $merge record. It is stored as received and, in an
// Original ID Merge project, joins the two clusters; in a Simplified one it
// has no effect.
type Merge struct {
	DistinctIDs [2]string
	TimeMs      int64
	IngestMs    int64
	Props       []byte // the record's properties object as received (normalised)
	Ref         int    // the caller's index of the record, for Rejection
}

// Batch is what one request contributes to a write. The store applies its
// parts in this order: merges, identity changes, events, profile updates.
type Batch struct {
	Project  int64
	Events   []Event
	Merges   []Merge
	Changes  []Change        // identity changes that events carry
	Profiles []ProfileUpdate // /engage and /groups updates, in request order
	// Checkpoint, when set, commits with the batch's records (see Syncs).
	Checkpoint *Checkpoint
	// RunID, when set, fences the write: it commits only if that run is
	// not recorded as ended (ErrRunEnded), so a process that stalled past
	// its lease cannot write beside the run that took over. Stores shared
	// by several processes check it in the write's transaction.
	RunID string
	// Source names where the events came from (SourceImport, …): the
	// usage counter their stored events add to (see Usage). "" counts as
	// SourceOther.
	Source string
	// Common, when set, is a JSON object of properties every event of the
	// batch has besides its own Props (a sync run's tags): a store may keep
	// it once for all of them. Scans return each event's Props with
	// Common's members after its own (SpliceProps). The writer guarantees
	// that no event's Props has a key of Common.
	Common []byte
}

// WriteResult counts what a write did. Duplicates were acknowledged but not
// stored again, because an equal event (same Key) already exists or appears
// earlier in the same write.
type WriteResult struct {
	Inserted   int
	Duplicates int
	Merges     int
	Changes    int // identity changes that changed a cluster
	Profiles   int // profile updates applied
	// Rejected lists records refused for what the store already holds
	// (a full identity cluster, a profile at its property limit), by Ref.
	// Nothing of a rejected record is stored.
	Rejected []Rejection
	// DupEvents lists, in a Batches entry, the indexes into its batch's
	// Events that were duplicates (in no particular order), so a sync
	// run's ledger can say which rows were new (ledger.go). Only
	// duplicates cost an entry.
	DupEvents []int32
	// Batches has one entry per batch given to Write, in the same order;
	// the fields above are their sums and the entries' own Batches are nil.
	// A group committer merges many requests into one Write, and each
	// request must learn what happened to its own records.
	Batches []WriteResult
}

// Scan selects events of one project by time range and, optionally, by name.
type Scan struct {
	Project int64
	// Resolve reports each event's distinct_id as the canonical id of its
	// identity cluster now, so merges apply to events stored before them.
	Resolve bool
	FromMs  int64    // inclusive
	ToMs    int64    // exclusive
	Events  []string // empty: every event name
	Limit   int      // 0: no limit
}

// ErrClosed is returned by a store used after Close.
var ErrClosed = errors.New("store: closed")

// Store is the durable home of accepted records.
type Store interface {
	// Write commits every batch in one transaction and returns only after
	// the data is durable: a crash after Write returns nil loses nothing,
	// a crash before leaves no partial batch. Events whose Key is already
	// stored (or repeats within the write) are skipped and counted as
	// duplicates; the first stored copy wins. The result reports counts for
	// the whole write and for each batch (WriteResult.Batches).
	Write(ctx context.Context, batches []Batch) (WriteResult, error)
	// ScanEvents streams matching events ordered by (TimeMs, arrival order).
	// The *Event and its byte slices are only valid during fn. Memory use
	// does not grow with the size of the range.
	ScanEvents(ctx context.Context, q Scan, fn func(*Event) error) error
	Identities
	Profiles
	Lookups
	Syncs
	Alerts
	Usage
	Members
	ImportData
	Shared
	Ledger
	// Ping reports whether the store can serve reads and writes.
	Ping(ctx context.Context) error
	Close() error
}
