package store

import (
	"context"
	"errors"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
)

// ErrModeChange refuses to change the ID management mode of a project that
// already holds data: its clusters were formed under the old rules.
var ErrModeChange = errors.New("a project's ID management mode cannot change once it holds data")

// ErrNotFound is returned for a lookup table that was never uploaded.
var ErrNotFound = errors.New("not found")

// Change is an identity change carried by an event: $identify and
// $create_alias (Original ID Merge), or an event with both $user_id and
// $device_id (Simplified). $merge records travel as Merge instead.
type Change struct {
	identity.Change
	// Event is the index in Batch.Events of the event carrying the change,
	// or -1. A rejected change rejects its event too: the record fails as a
	// whole and nothing of it is stored.
	Event int
	Ref   int // the caller's index of the record, for Rejection
}

// Rejection is a record the store refused; Err wraps identity.ErrClusterFull
// or a profile error (see package profile).
type Rejection struct {
	Ref int
	Err error
}

// Identities is identity state: each project's mode and clusters.
type Identities interface {
	// SetMode fixes a project's ID management mode. It fails with
	// ErrModeChange when the project holds data under another mode. A
	// project whose mode was never set is treated as Simplified, the
	// default of new projects.
	SetMode(ctx context.Context, project int64, mode identity.Mode) error
	// Resolve returns the canonical id of id's cluster, as of every write
	// acknowledged before the call.
	Resolve(ctx context.Context, project int64, id string) (string, error)
}

// ProfileUpdate is one /engage or /groups update. User updates apply to the
// canonical id of the distinct_id's cluster unless IgnoreAlias is set;
// profiles of ids that a later merge joins are merged into the canonical
// id's profile, whose own values win.
type ProfileUpdate struct {
	profile.Update
	Ref int // the caller's index of the record, for Rejection
}

// ProfileScan selects profiles of one project and kind.
type ProfileScan struct {
	Project  int64
	Kind     profile.Kind
	GroupKey string   // groups: which group key; users: ignored
	IDs      []string // empty: every profile
}

// StoredProfile is a profile as a read sees it.
type StoredProfile struct {
	ID        string // user: distinct_id (canonical); group: group id
	Props     []byte // compact JSON object
	UpdatedMs int64  // when the last update was accepted
}

// Profiles is the user and group profile store.
type Profiles interface {
	// ScanProfiles streams the existing profiles q selects, ordered by id.
	// *StoredProfile and its bytes are only valid during fn.
	ScanProfiles(ctx context.Context, q ProfileScan, fn func(*StoredProfile) error) error
}

// LookupRows is a table to store, one bounded batch at a time
// (lookup.Stream for an upload, Table.Batches for a table in memory).
type LookupRows interface {
	Columns() []string
	// Next returns the next batch, valid until the following call, or
	// io.EOF after the last.
	Next() (*lookup.Batch, error)
}

// Lookups holds lookup tables, each replaced whole.
type Lookups interface {
	// ReplaceLookup atomically replaces a table's rows with those rows
	// yields, appending each batch inside the replacement's transaction;
	// durable on return. A key repeated from an earlier batch fails it with
	// Batch.Duplicate's error, and any error from rows.Next (wrapped) rolls
	// it back: the previous table stays whole, and readers see it or the
	// new one, never a mix.
	ReplaceLookup(ctx context.Context, project int64, id string, rows LookupRows) error
	// ScanLookup streams a table's rows (key, compact JSON object) in key
	// order; ErrNotFound when it was never uploaded.
	ScanLookup(ctx context.Context, project int64, id string, fn func(key string, row []byte) error) error
}
