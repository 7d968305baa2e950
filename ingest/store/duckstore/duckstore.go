// Package duckstore is the embedded default store: one DuckDB file.
//
// Durability comes from a write log in front of DuckDB (package wal): a
// Write is acknowledged once its rows are in one fsynced log entry, and a
// background loader moves entries into the tables, recording the applied
// position in the same transaction (loader.go). DuckDB's own commit stalls
// behind its checkpoints for up to a second at ingest volume; the log keeps
// that off the request path. Scans first wait for the loader to reach the
// log's end, so every reader sees every acknowledged write.
//
// Dedup does not use a database index (a primary key makes DuckDB appends
// ~20x slower); instead the keys of all dedupable events are loaded at
// Open into a set of their own (recent ones in memory, older ones in
// sorted files beside the database: keyset_choice.go), and a single
// writer filters each write against them before logging it.
package duckstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/internal/storekit"
	"github.com/tributary-dev/tributary/ingest/wal"
)

// Options tune the DuckDB instance.
type Options struct {
	MemoryLimit string // e.g. "2GB"; "" = DuckDB default (80% of RAM)
	Threads     int    // 0 = DuckDB default (one per core)
	// ReturnFreedMemory makes DuckDB's allocator (the process's) give
	// freed pages back after freedDecayMs instead of its default delay.
	// Linux/amd64 only.
	ReturnFreedMemory bool
	// LoadChunkBytes ends one loader INSERT (an Arrow batch held in Go
	// memory) at this many bytes of event strings, before the row group
	// is full; 0 or more than 256MB = 256MB. The loader holds two such
	// chunks (loadpipe.go). A small memory budget lowers it: 6MB (~13k
	// rows) instead of a row group cost a sync no measurable rate, the
	// loader having a core of its own; /import is unmeasured.
	LoadChunkBytes int
	// LoadTxnRows ends a loader transaction after this many rows; 0 or
	// more than two row groups = two row groups (loadTxnRows). DuckDB
	// holds a transaction's rows uncompressed until its COMMIT, so this
	// bounds that memory, which a small budget lowers.
	LoadTxnRows int
	// RowGroupRows is the rows of the row groups DuckDB writes from now
	// on: 0 = DuckDB's 122,880 (RowGroupRows); otherwise a multiple of
	// 2048 up to that. A file may hold row groups of several sizes.
	RowGroupRows int
	// LoaderLagBytes is how many log bytes the loader may fall behind
	// writes before each write is slowed (Store.pace); at four times that,
	// writes wait for it. 0 = 128 MB. The loader gathers a row group of
	// rows, or twice this many bytes, before it applies them. A one-off
	// sync lowers it: whatever lag is left when the source is exhausted
	// is applied by the loader alone, on one core, before the command can
	// exit.
	LoaderLagBytes int64
	Logger         *slog.Logger

	// keys overrides the dedup set's tiers (tests: small tiers spill,
	// merge and checkpoint within a few thousand events); zero: default.
	keys keysConfig
}

// freedDecayMs is how long DuckDB's allocator keeps freed pages with
// Options.ReturnFreedMemory. DuckDB frees the uncompressed rows of each
// loader transaction at its COMMIT (~80 MB for two row groups of a
// 12-column table) and the next transaction allocates as much again.
// With a delay of 0 (a 1 s delay had cost a 5M-row sync 321-340 MiB of
// peak RSS with DuckDB's share at 64 MB) every page of that came back as
// a page fault, and on a machine where faults are dear (a paravirtualised
// guest: ~10 µs each) faults and madvise were a fifth of the sync's CPU:
// 5M-row syncbench, 550-580k faults and 8.4-11 s of system time against
// 140-175k and 4.4-6.7 s with 100 ms, user+sys 31-38 s against 23-31 s.
const freedDecayMs = 100

// checkpointThreshold is how much WAL may accumulate before DuckDB folds it
// into the main file. The loader commits hundreds of thousands of rows at
// a time; each such commit then checkpoints right away (DuckDB skips its WAL
// for large commits that would trigger one), so the cost is paid evenly
// per commit. A larger threshold (256MB, measured) only let a few small
// commits pile up into a multi-second checkpoint that stalled the loader,
// and through back-pressure every writer. 16MB still batches the small
// commits of a quiet server, so a checkpoint does not rewrite the table's
// last row group every few thousand events.
const checkpointThreshold = "16MB"

// maxVacuumTasks = 0 stops checkpoints from merging partly filled row groups.
// Every large loader commit ends in one such group, and the first ordinary
// checkpoint after a few small commits merged all of them at once
// (measured: 4.5 s with 3.6M rows, 13 s with 10M, during which the loader
// stood still and back-pressure stopped every writer). Events are deleted
// only when an import's data is (a rare admin action), so vacuum has
// little else to reclaim; the price is some partly filled row groups and
// the space of deleted events staying in the file until it is rewritten.
const maxVacuumTasks = "0"

// schemaVersion is bumped by every change to the tables below; Open refuses
// files written by a newer version instead of misreading them. 3: a
// Mirror state keeps versions of a key (mirror_versions.go), which older
// builds would read as duplicates.
const schemaVersion = 3

var schema = []string{
	`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`,
	// seq is one arrival counter shared by events and merges: it orders
	// equal times and survives restarts (Open resumes after the maximum).
	// k_hi/k_lo are the two halves of store.Key, NULL without insert id.
	// This is the table of files in DuckDB's v0.10.2 format, made before
	// storageVersion (storage.go), which creates eventsTable first. props
	// and insert_id are nearly unique per row, so DuckDB's dictionary never
	// wins for them, yet its analysis hashed every string at each
	// checkpoint; naming FSST up front skips that (measured: loader CPU
	// -15% per event, same file size). Files made before keep "auto": both
	// read the same.
	`CREATE TABLE IF NOT EXISTS events (
		project BIGINT NOT NULL, name VARCHAR NOT NULL, distinct_id VARCHAR NOT NULL,
		time_ms BIGINT NOT NULL, insert_id VARCHAR USING COMPRESSION fsst,
		props VARCHAR NOT NULL USING COMPRESSION fsst,
		ingest_ms BIGINT NOT NULL, seq BIGINT NOT NULL, k_hi BIGINT, k_lo BIGINT)`,
	`CREATE TABLE IF NOT EXISTS merges (
		project BIGINT NOT NULL, distinct_id_1 VARCHAR NOT NULL, distinct_id_2 VARCHAR NOT NULL,
		time_ms BIGINT NOT NULL, ingest_ms BIGINT NOT NULL, props VARCHAR NOT NULL, seq BIGINT NOT NULL)`,
	// Batches' common properties, kept once (common.go); NULL: none. Added
	// in schema version 2, to files made before too.
	`ALTER TABLE events ADD COLUMN IF NOT EXISTS common BIGINT`,
	`CREATE TABLE IF NOT EXISTS common_props (id BIGINT NOT NULL, props VARCHAR NOT NULL)`,
	// How far the write log has been applied; advanced by each loader transaction.
	`CREATE TABLE IF NOT EXISTS log_state (applied_lsn BIGINT NOT NULL)`,
	// The tables below came after version 1 files existed; IF NOT EXISTS
	// adds them to those files, which read the same otherwise.
	`CREATE TABLE IF NOT EXISTS projects (project BIGINT NOT NULL, id_mode VARCHAR NOT NULL)`,
	// Only changes that changed a cluster, in seq order: replaying them
	// rebuilds each project's identity graph exactly (identity.Replay).
	`CREATE TABLE IF NOT EXISTS identity_changes (
		project BIGINT NOT NULL, seq BIGINT NOT NULL, kind UTINYINT NOT NULL, a VARCHAR NOT NULL, b VARCHAR NOT NULL)`,
	// One row per existing profile. No primary key: DuckDB refuses a
	// delete and re-insert of one key in a transaction, which is how the
	// loader replaces a profile; a plain index serves the point reads.
	`CREATE TABLE IF NOT EXISTS profiles (
		project BIGINT NOT NULL, kind UTINYINT NOT NULL, group_key VARCHAR NOT NULL, id VARCHAR NOT NULL,
		props VARCHAR NOT NULL, updated_ms BIGINT NOT NULL)`,
	`CREATE INDEX IF NOT EXISTS profiles_id ON profiles (id)`,
	`CREATE TABLE IF NOT EXISTS lookup_tables (
		project BIGINT NOT NULL, id VARCHAR NOT NULL, columns VARCHAR NOT NULL, rows BIGINT NOT NULL, updated_ms BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS lookup_rows (project BIGINT NOT NULL, table_id VARCHAR NOT NULL, key VARCHAR NOT NULL, row VARCHAR NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS checkpoints (project BIGINT NOT NULL, import VARCHAR NOT NULL, value BLOB NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS sync_runs (
		id VARCHAR NOT NULL, project BIGINT NOT NULL, import VARCHAR NOT NULL, trigger VARCHAR NOT NULL,
		period VARCHAR NOT NULL, status VARCHAR NOT NULL, reason VARCHAR NOT NULL,
		started_ms BIGINT NOT NULL, ended_ms BIGINT NOT NULL, rows_read BIGINT NOT NULL, imported BIGINT NOT NULL,
		duplicate BIGINT NOT NULL, failed BIGINT NOT NULL, bytes BIGINT NOT NULL, failures VARCHAR NOT NULL)`,
	// Run leases (syncs.go), added to files made before they existed.
	`ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS owner VARCHAR DEFAULT ''`,
	`ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS lease_until_ms BIGINT DEFAULT 0`,
	`CREATE TABLE IF NOT EXISTS import_docs (project BIGINT NOT NULL, id VARCHAR NOT NULL, doc VARCHAR NOT NULL)`,
	// Events stored per project, month (YYYY-MM, UTC) and source (usage.go).
	`CREATE TABLE IF NOT EXISTS usage_counters (project BIGINT NOT NULL, month VARCHAR NOT NULL, source VARCHAR NOT NULL, events BIGINT NOT NULL)`,
	// The alert outbox and the monitoring rules' state (alerts.go).
	`CREATE TABLE IF NOT EXISTS alert_outbox (
		id VARCHAR NOT NULL, destination VARCHAR NOT NULL, project BIGINT NOT NULL, import VARCHAR NOT NULL,
		kind VARCHAR NOT NULL, body VARCHAR NOT NULL, created_ms BIGINT NOT NULL, attempts INTEGER NOT NULL,
		next_ms BIGINT NOT NULL, last_error VARCHAR NOT NULL, status VARCHAR NOT NULL,
		lease_owner VARCHAR NOT NULL, lease_until_ms BIGINT NOT NULL, settled_ms BIGINT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS alert_states (
		project BIGINT NOT NULL, import VARCHAR NOT NULL, rule VARCHAR NOT NULL, state VARCHAR NOT NULL,
		detail VARCHAR NOT NULL, updated_ms BIGINT NOT NULL)`,
}

// Store is a store.Store backed by one DuckDB file.
type Store struct {
	db   *sql.DB
	path string
	lock *os.File // held while open; see lockFile
	log  *slog.Logger
	// sharedMu serialises the Shared statements (tokens, rate counters):
	// DuckDB answers two connections updating one row at once with a
	// transaction conflict instead of waiting, and a lost AddRate would
	// break its promise. Calls are rare, so the lock costs nothing.
	sharedMu sync.Mutex
	// mirrorMu lets a compaction of mirror_keys (mirror_versions.go),
	// which replaces the table, run alone: every other statement on the
	// table holds it shared.
	mirrorMu sync.RWMutex

	// ops is the lifecycle guard: Close waits for operations in flight so
	// the file is released (and checkpointed) when it returns.
	ops storekit.Gate

	// wsem is the writer lock (a channel so waiting honours ctx). It
	// guards keys, nextSeq and scratch.
	wsem    chan struct{}
	keys    dedupSet
	keysCfg keysConfig
	nextSeq int64
	scratch writeScratch

	wal *wal.Log // every acknowledged write, until the loader applied it

	graphs  graphs          // identity state per project (identity.go)
	pending pendingProfiles // profile states logged, not yet in the table
	syncs   syncState       // checkpoints and the run-start lock (syncs.go)
	usage   usageState      // monthly usage counters (usage.go)
	common  commonProps     // common_props as far as used (common.go)
	// broken stops writes after one left state ahead of the log (Write).
	broken error

	// The loader goroutine alone uses writer, writerBroken and loadArgs
	// (and Open, before the loader starts).
	writer *sql.Conn // dedicated: the Arrow view, appender and transaction live on it
	// writerBroken: a ROLLBACK failed, so writer may still be inside a
	// transaction; the next load replaces the connection first.
	writerBroken bool
	pipe         *loadPipe     // the loader's two Arrow chunks, reused
	ledgerRows   *ledgerChunk  // the loader's ledger entries (ledger_log.go)
	ledgerPrunes atomic.Uint64 // PruneLedger's commits, for ledgerRows
	ledgerMu     sync.Mutex    // guards ledgerEnc
	ledgerEnc    []byte        // AddLedger's log entry, reused
	chunkBytes   int           // Options.LoadChunkBytes, resolved
	txnRows      int           // Options.LoadTxnRows, resolved
	// paceFrom and maxLag are Options.LoaderLagBytes resolved: where Write
	// begins to slow down, and where it waits for the loader.
	paceFrom, maxLag int64

	wake       chan struct{} // capacity 1: "the log grew"
	quit       chan struct{} // closed by Close
	loaderDone chan struct{}

	// applyMu guards the loader's progress, which writes and scans wait on.
	applyMu   sync.Mutex
	applyCond *sync.Cond
	applied   uint64 // last LSN in the tables (log_state.applied_lsn)
	unapplied int64  // log bytes written but not yet applied
	// unappliedRows counts the rows of those bytes, as decodeEntry counts
	// them; the loader waits for a full transaction of them (gather).
	unappliedRows int64
	// hurry counts waiters on the loader (waitFor): it applies what there
	// is at once instead of gathering a full transaction.
	hurry int
	// gatherRows is how many rows the loader waits for (see gather): a
	// row group, or LoadTxnRows when that is less.
	gatherRows int64
	// gatherWait is loaderGather; 0 applies at every wake (tests change
	// it to make the loader's transactions deterministic).
	gatherWait time.Duration
	loaderErr  error // the loader's last failure, nil once it recovers
	// loaderFails counts the loader's failed passes; loaderStreak those
	// since its last success (see syncFailFast).
	loaderFails  uint64
	loaderStreak int
	closing      bool // Close began: waiters give up instead of blocking it

	// scanPage is the size of a scan's first page (maxScanPage; tests
	// lower it to cross page boundaries with little data).
	scanPage int
	// windowedScans, set by tests, sends every scan the slow way
	// (scanWindowed), which otherwise only a sort out of memory takes.
	windowedScans bool

	// beforeCommit, when set by tests, runs on the writer connection after
	// the loader appended rows and before COMMIT; an error aborts that load.
	beforeCommit func(c *duckdb.Conn) error
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the database file at path, creating parent
// directories and the schema as needed, and loads the dedup keys.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("duckstore: invalid path %q", path)
	}
	if opt.LoadChunkBytes < 0 {
		return nil, fmt.Errorf("duckstore: LoadChunkBytes must not be negative, got %d", opt.LoadChunkBytes)
	}
	if opt.LoaderLagBytes < 0 {
		return nil, fmt.Errorf("duckstore: LoaderLagBytes must not be negative, got %d", opt.LoaderLagBytes)
	}
	if opt.LoadTxnRows < 0 {
		return nil, fmt.Errorf("duckstore: LoadTxnRows must not be negative, got %d", opt.LoadTxnRows)
	}
	if n := opt.RowGroupRows; n < 0 || n > RowGroupRows || n%2048 != 0 {
		return nil, fmt.Errorf("duckstore: RowGroupRows must be a multiple of 2048 from 0 to %d, got %d", RowGroupRows, n)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("duckstore: create directory: %w", err)
	}
	cfg := url.Values{"checkpoint_threshold": {checkpointThreshold}, "max_vacuum_tasks": {maxVacuumTasks}}
	if opt.MemoryLimit != "" {
		cfg.Set("memory_limit", opt.MemoryLimit)
	}
	if opt.Threads > 0 {
		cfg.Set("threads", strconv.Itoa(opt.Threads))
	}
	lock, err := lockFile(path)
	if err != nil {
		return nil, fmt.Errorf("duckstore: open %s: %w", path, err)
	}
	// Checked under the lock, so two Opens cannot both see a new file.
	fresh, err := isNewFile(path)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("duckstore: open %s: %w", path, err), lock.Close())
	}
	connector, err := connect(path, cfg, fresh, opt.RowGroupRows)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("duckstore: open %s: %w", path, err), lock.Close())
	}
	s := &Store{
		db:         sql.OpenDB(connector),
		path:       path,
		lock:       lock,
		log:        opt.Logger,
		wsem:       make(chan struct{}, 1),
		scanPage:   maxScanPage,
		chunkBytes: arrowChunkBytes,
		txnRows:    loadTxnRows,
		wake:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		loaderDone: make(chan struct{}),
		keysCfg:    opt.keys,
	}
	if s.keysCfg == (keysConfig{}) {
		s.keysCfg = defaultKeysConfig()
	}
	s.applyCond = sync.NewCond(&s.applyMu)
	if opt.LoadChunkBytes > 0 {
		s.chunkBytes = min(opt.LoadChunkBytes, arrowChunkBytes)
	}
	s.pipe = newLoadPipe(s.chunkBytes)
	s.ledgerRows = newLedgerChunk(&s.ledgerPrunes)
	if opt.LoadTxnRows > 0 {
		s.txnRows = min(opt.LoadTxnRows, loadTxnRows)
	}
	s.paceFrom = defaultLag
	if opt.LoaderLagBytes > 0 {
		s.paceFrom = opt.LoaderLagBytes
	}
	s.maxLag = 4 * s.paceFrom
	s.gatherWait = loaderGather
	s.gatherRows = int64(min(s.txnRows, cmp.Or(opt.RowGroupRows, RowGroupRows)))
	s.pending.m, s.pending.stored = map[profileKey]pendingProfile{}, map[int64]bool{}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.init(ctx, fresh); err != nil {
		var walErr, connErr, keysErr error
		if s.keys != nil {
			keysErr = s.keys.close()
		}
		if s.wal != nil {
			walErr = s.wal.Close()
		}
		if s.writer != nil {
			connErr = s.writer.Close()
		}
		return nil, errors.Join(fmt.Errorf("duckstore: open %s: %w", path, err), walErr, connErr, keysErr, s.db.Close(), lock.Close())
	}
	if opt.ReturnFreedMemory {
		// After init: DuckDB sets its own delays when the database opens.
		if err := returnFreedMemory(); err != nil {
			s.log.Warn("duckstore: DuckDB's allocator keeps freed memory for a while", "err", err)
		}
	}
	go s.runLoader()
	return s, nil
}

func (s *Store) init(ctx context.Context, fresh bool) error {
	// A first Open cut off before this leaves a v1.2.0 file without events;
	// the next Open creates the FSST table there, which that format writes.
	if fresh {
		if _, err := s.db.ExecContext(ctx, eventsTable); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	// One transaction: one WAL sync instead of one per statement (~35 ms
	// of a fresh store's Open, which `tributary sync` pays every time).
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	for _, stmt := range slices.Concat(schema, membersSchema, sharedSchema, mirrorSchema, dailySchema, historySchema, ledgerTables) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("create schema: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	var version sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case !version.Valid:
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version VALUES (?)`, schemaVersion); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
	case version.Int64 > schemaVersion:
		return fmt.Errorf("file has schema version %d, this build knows up to %d", version.Int64, schemaVersion)
	case version.Int64 < schemaVersion:
		// The statements above brought it up to date; older builds must
		// now refuse it (they would insert events without common).
		if _, err := s.db.ExecContext(ctx, `UPDATE schema_version SET version = ?`, schemaVersion); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
	}
	if s.writer, err = s.db.Conn(ctx); err != nil {
		return fmt.Errorf("writer connection: %w", err)
	}
	if err := s.loadProfiledProjects(ctx); err != nil {
		return err
	}
	if err := s.openLog(ctx); err != nil {
		return err
	}
	err = s.db.QueryRowContext(ctx,
		`SELECT greatest((SELECT coalesce(max(seq), 0) FROM events), (SELECT coalesce(max(seq), 0) FROM merges),
			(SELECT coalesce(max(seq), 0) FROM identity_changes))`,
	).Scan(&s.nextSeq)
	if err != nil {
		return fmt.Errorf("read sequence: %w", err)
	}
	s.nextSeq++
	if err := s.loadIdentity(ctx); err != nil {
		return err
	}
	if err := s.loadCheckpoints(ctx); err != nil {
		return err
	}
	if err := s.loadUsage(ctx); err != nil {
		return err
	}
	return s.loadKeys(ctx)
}

// openLog opens the write log beside the database file and applies what
// a crash left unapplied, before keys and sequence are read from the tables.
func (s *Store) openLog(ctx context.Context) error {
	var applied sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(applied_lsn) FROM log_state`).Scan(&applied); err != nil {
		return fmt.Errorf("read log state: %w", err)
	}
	if !applied.Valid {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO log_state VALUES (0)`); err != nil {
			return fmt.Errorf("init log state: %w", err)
		}
	}
	s.applied = uint64(applied.Int64)
	var err error
	if s.wal, err = wal.Open(s.path + ".log"); err != nil {
		return err
	}
	if last := s.wal.LastLSN(); last < s.applied {
		return fmt.Errorf("the write log ends at entry %d but the tables hold entries up to %d: the log was lost or replaced", last, s.applied)
	}
	start, pending := time.Now(), s.wal.LastLSN()-s.applied
	if _, err := s.applyPending(ctx, true); err != nil {
		return fmt.Errorf("replay write log: %w", err)
	}
	s.unapplied, s.unappliedRows = 0, 0 // replay drained bytes this process never counted
	if pending > 0 {
		s.log.Info("duckstore: replayed write log", "entries", pending, "took", time.Since(start))
	}
	return nil
}

// enter registers an operation, refusing once Close has begun.
func (s *Store) enter(op string) error { return s.ops.Enter("duckstore", op) }

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter("ping"); err != nil {
		return err
	}
	defer s.ops.Done()
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("duckstore: ping: %w", err)
	}
	return nil
}

// Close waits for operations in flight, then closes the database, which
// checkpoints the WAL into the main file. It must not be called from a
// ScanEvents callback. Later calls return nil.
func (s *Store) Close() error {
	if !s.ops.Shut() {
		return nil
	}
	s.applyMu.Lock()
	s.closing = true // a write stuck on back-pressure must not hang Close
	s.applyCond.Broadcast()
	s.applyMu.Unlock()
	s.ops.Wait()
	close(s.quit)
	<-s.loaderDone // it applies what is left first, so the log is empty
	var errs []error
	errs = append(errs, s.wal.Close(), s.keepKeys())
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	// The database must be closed (and checkpointed) before the lock goes.
	errs = append(errs, s.db.Close(), s.lock.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("duckstore: close: %w", err)
	}
	return nil
}
