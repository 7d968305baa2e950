package connectors

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
)

// ChangeFeed is implemented by sources whose warehouse can report the row
// changes of a table since a position (Postgres logical replication), so
// a Mirror sync reads only what changed instead of re-reading the table.
// A Mirror sync works without it: it re-reads the table and diffs it by
// key against the state it keeps in Tributary's store. The feed only
// saves the full read, so every failure of the feed falls back to that.
//
// The sequence for one import:
//
//	pos := StartFeed(f)          // before the first full read: nothing committed after pos is missed
//	full keyed diff of the table; commit pos with the applied changes
//	loop: next := Changes(f, pos, fn); apply; commit next with them; ConfirmFeed(f, next)
//
// Changes replays from pos to the end of what is committed when it is
// called, so changes that the full read already saw are replayed too;
// applying a change is idempotent (the mirror state compares row hashes),
// so the replay ends in the table's current state.
type ChangeFeed interface {
	// StartFeed creates the feed (or recreates it, dropping a previous one
	// of the same name) and returns the position from which Changes
	// reports every committed change.
	StartFeed(ctx context.Context, f Feed) (pos string, err error)
	// Changes streams the changes committed after pos, in commit order, up
	// to the end of what was committed when Changes was called, and
	// returns the position to resume from. Each batch holds the key
	// columns and the table's columns (f.Columns, or all when empty) after
	// a leading utf8 column named ChangeOpColumn holding ChangeInsert,
	// ChangeUpdate or ChangeDelete; a delete's non-key columns are null.
	// An error wrapping ErrFeedLost means the feed cannot continue from
	// pos (slot dropped, table recreated or altered, feed stale): the
	// caller re-diffs the table and calls StartFeed again.
	Changes(ctx context.Context, f Feed, pos string, fn func(arrow.RecordBatch) error) (next string, err error)
	// ConfirmFeed tells the warehouse that everything up to pos is
	// durably applied, so it may discard it. Called only after the
	// position is committed in Tributary's store: a crash before that
	// replays from the stored position, which the feed still holds.
	ConfirmFeed(ctx context.Context, f Feed, pos string) error
	// DropFeed removes the feed and what it holds in the warehouse (the
	// import was deleted or left Mirror mode). Dropping a feed that does
	// not exist is not an error.
	DropFeed(ctx context.Context, f Feed) error
}

// Feed names one import's change feed.
type Feed struct {
	// Name is unique per import and safe as a warehouse identifier
	// (lower-case letters, digits, underscores), e.g. "tributary_p1_i42".
	Name  string
	Table Table // a table; a query has no change feed
	// Key is the table's primary key (or the import's key columns).
	Key []string
	// Columns to report; empty reports all.
	Columns []string
}

// ChangeOpColumn is the leading column of a change batch.
const ChangeOpColumn = "$op"

// The values of ChangeOpColumn.
const (
	ChangeInsert = "insert"
	ChangeUpdate = "update"
	ChangeDelete = "delete"
)

// ErrFeedLost means a change feed cannot continue from the position asked
// for; the caller falls back to a full keyed re-diff.
var ErrFeedLost = errors.New("change feed lost")

// ErrFeedUnavailable means a source cannot offer a change feed for this
// table at all (no replication privilege, the warehouse not configured
// for it, a table shape the feed cannot report exactly); the caller uses
// the keyed re-diff for every run and may try StartFeed again later, e.g.
// after the next restart. The error says why, for the run's log.
var ErrFeedUnavailable = errors.New("change feed unavailable")
