package store

import (
	"context"

	"github.com/zeebo/xxh3"
)

// Outcome is what one run did with one source row (the ledger's code).
type Outcome uint8

// Outcomes. The numbers are stored: append, never renumber.
const (
	OutcomeImported  Outcome = 1 // stored as a new record
	OutcomeDuplicate Outcome = 2 // an equal record was stored already
	OutcomeRefused   Outcome = 3 // refused by mapping or validation (Field, Reason)
	OutcomeInserted  Outcome = 4 // Mirror: a new key
	OutcomeUpdated   Outcome = 5 // Mirror: a changed row
	OutcomeDeleted   Outcome = 6 // Mirror: a key gone from the table
)

var outcomeNames = [...]string{"", "imported", "duplicate", "refused", "inserted", "updated", "deleted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// MaxLedgerKey is how much of a key's text the ledger keeps: enough to
// show it, while the hash (LedgerKeyHash) is what lookups match on.
const MaxLedgerKey = 128

// LedgerKeyHash is the 16-byte digest the ledger and the quarantine file a
// source key under, so a long key costs 16 bytes to find.
func LedgerKeyHash(key string) [16]byte {
	return xxh3.HashString128(key).Bytes()
}

// TruncKey cuts key to MaxLedgerKey bytes for display, at a rune boundary.
func TruncKey(key string) string {
	if len(key) <= MaxLedgerKey {
		return key
	}
	n := MaxLedgerKey
	for n > 0 && key[n]&0xC0 == 0x80 {
		n--
	}
	return key[:n]
}

// LedgerRun names the run a batch of ledger entries belongs to.
type LedgerRun struct {
	Project int64
	Import  string
	Run     string
	AtMs    int64 // the run's start
}

// LedgerEntry is one row's outcome in one run, as a run hands it to
// AddLedger: the key's hash only, so an entry costs a few bytes (the
// caller of LedgerHistory knows the key it asks about).
type LedgerEntry struct {
	Hash    [16]byte // LedgerKeyHash of the full key
	Outcome Outcome
	Field   string // refused rows only
	Reason  string // refused rows only
}

// LedgerLine is one run's entry of a key, as LedgerHistory returns it.
type LedgerLine struct {
	Run     string
	AtMs    int64
	Outcome Outcome
	Field   string
	Reason  string
}

// QuarantineRow is a refused row kept for a replay: the row as read from
// the source (Row, an Arrow IPC stream of one row, so a replay maps it
// with its source types) and why it was refused. One per key: a later
// refusal of the same key replaces it.
type QuarantineRow struct {
	Hash   [16]byte
	Key    string
	Run    string
	AtMs   int64
	Field  string
	Reason string
	Row    []byte
}

// Ledger is the row-level ledger of sync runs and the quarantine of
// refused rows, both kept for a retention period (PruneLedger). Entries
// are written after the records they describe, apart from them: a crash
// in between loses ledger lines, never records.
type Ledger interface {
	// AddLedger appends one run's entries and stores (replacing by key)
	// quarantine rows of its import. Once it returns, they survive a
	// crash, and LedgerHistory sees them.
	AddLedger(ctx context.Context, run LedgerRun, entries []LedgerEntry, quarantine []QuarantineRow) error
	// LedgerHistory returns the entries of one key, newest first (by
	// AtMs, then Run descending), at most limit.
	LedgerHistory(ctx context.Context, project int64, importID string, hash [16]byte, limit int) ([]LedgerLine, error)
	// Quarantined returns an import's quarantined rows ordered by Hash,
	// those after the hash after (nil: from the start), at most limit.
	Quarantined(ctx context.Context, project int64, importID string, after *[16]byte, limit int) ([]QuarantineRow, error)
	// Unquarantine removes rows by hash (a replay imported them).
	Unquarantine(ctx context.Context, project int64, importID string, hashes [][16]byte) error
	// PruneLedger deletes ledger entries and quarantine rows older than
	// beforeMs and returns how many.
	PruneLedger(ctx context.Context, beforeMs int64) (int64, error)
}
