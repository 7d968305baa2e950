// Package duckstore is the embedded default store: one DuckDB file.
//
// Durability comes from DuckDB itself: every Write is one transaction whose
// COMMIT fsyncs the write-ahead log. Dedup does not use a database index
// (a primary key makes DuckDB appends ~20x slower); instead the keys of all
// dedupable events live in memory, loaded at Open, and a single writer
// filters each write against them before appending.
package duckstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Options tune the DuckDB instance.
type Options struct {
	MemoryLimit string // e.g. "2GB"; "" = DuckDB default (80% of RAM)
	Threads     int    // 0 = DuckDB default (one per core)
	Logger      *slog.Logger
}

// checkpointThreshold is how much WAL may accumulate before DuckDB folds it
// into the main file. The default (16MB) makes a checkpoint every few
// thousand events, each rewriting row groups while the writer waits.
const checkpointThreshold = "256MB"

// schemaVersion is bumped by every change to the tables below; Open refuses
// files written by a newer version instead of misreading them.
const schemaVersion = 1

var schema = []string{
	`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`,
	// seq is one arrival counter shared by events and merges: it orders
	// equal times and survives restarts (Open resumes after the maximum).
	// k_hi/k_lo are the two halves of store.Key, NULL without insert id.
	`CREATE TABLE IF NOT EXISTS events (
		project BIGINT NOT NULL, name VARCHAR NOT NULL, distinct_id VARCHAR NOT NULL,
		time_ms BIGINT NOT NULL, insert_id VARCHAR, props VARCHAR NOT NULL,
		ingest_ms BIGINT NOT NULL, seq BIGINT NOT NULL, k_hi BIGINT, k_lo BIGINT)`,
	`CREATE TABLE IF NOT EXISTS merges (
		project BIGINT NOT NULL, distinct_id_1 VARCHAR NOT NULL, distinct_id_2 VARCHAR NOT NULL,
		time_ms BIGINT NOT NULL, ingest_ms BIGINT NOT NULL, props VARCHAR NOT NULL, seq BIGINT NOT NULL)`,
}

// Store is a store.Store backed by one DuckDB file.
type Store struct {
	db   *sql.DB
	path string
	lock *os.File // held while open; see lockFile
	log  *slog.Logger

	// life guards closed and ops: Close waits for operations in flight so
	// the file is released (and checkpointed) when it returns.
	life   sync.Mutex
	closed bool
	ops    sync.WaitGroup

	// wsem is the writer lock (a channel so waiting honours ctx). It guards
	// everything below.
	wsem   chan struct{}
	writer *sql.Conn // dedicated: the appender and the transaction live on it
	// writerBroken: a ROLLBACK failed, so writer may still be inside a
	// transaction; the next Write replaces the connection first.
	writerBroken bool
	keys         *keySet
	nextSeq      int64
	scratch      writeScratch

	// scanPage is the size of a scan's first page (maxScanPage; tests
	// lower it to cross page boundaries with little data).
	scanPage int

	// beforeCommit, when set by tests, runs on the writer connection after
	// the rows are appended and before COMMIT; an error aborts the write there.
	beforeCommit func(c *duckdb.Conn) error
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the database file at path, creating parent
// directories and the schema as needed, and loads the dedup keys.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("duckstore: invalid path %q", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("duckstore: create directory: %w", err)
	}
	cfg := url.Values{"checkpoint_threshold": {checkpointThreshold}}
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
	connector, err := duckdb.NewConnector(path+"?"+cfg.Encode(), nil)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("duckstore: open %s: %w", path, err), lock.Close())
	}
	s := &Store{
		db:       sql.OpenDB(connector),
		path:     path,
		lock:     lock,
		log:      opt.Logger,
		wsem:     make(chan struct{}, 1),
		scanPage: maxScanPage,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.init(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("duckstore: open %s: %w", path, err), s.db.Close(), lock.Close())
	}
	return s, nil
}

func (s *Store) init(ctx context.Context) error {
	for _, stmt := range schema {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
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
	}
	err := s.db.QueryRowContext(ctx,
		`SELECT greatest((SELECT coalesce(max(seq), 0) FROM events), (SELECT coalesce(max(seq), 0) FROM merges))`,
	).Scan(&s.nextSeq)
	if err != nil {
		return fmt.Errorf("read sequence: %w", err)
	}
	s.nextSeq++
	if err := s.loadKeys(ctx); err != nil {
		return err
	}
	if s.writer, err = s.db.Conn(ctx); err != nil {
		return fmt.Errorf("writer connection: %w", err)
	}
	return nil
}

// loadKeys fills the in-memory dedup set from the events table. Reading
// rows and inserting keys cost about the same, so a goroutine reads while
// this one inserts.
func (s *Store) loadKeys(ctx context.Context) error {
	start := time.Now()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE k_hi IS NOT NULL`).Scan(&n); err != nil {
		return fmt.Errorf("count keys: %w", err)
	}
	s.keys = newKeySet(n)
	rows, err := s.db.QueryContext(ctx, `SELECT k_hi, k_lo FROM events WHERE k_hi IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	const chunk = 8192
	full := make(chan []store.Key, 4)
	empty := make(chan []store.Key, 4)
	var readErr error
	go func() {
		defer close(full)
		defer rows.Close()
		buf := make([]store.Key, 0, chunk)
		var hi, lo int64
		for rows.Next() {
			if err := rows.Scan(&hi, &lo); err != nil {
				readErr = err
				return
			}
			if buf = append(buf, joinKey(hi, lo)); len(buf) == chunk {
				full <- buf
				select {
				case buf = <-empty:
				default:
					buf = make([]store.Key, 0, chunk)
				}
			}
		}
		readErr = rows.Err()
		full <- buf
	}()
	for buf := range full {
		for _, k := range buf {
			s.keys.add(k)
		}
		select {
		case empty <- buf[:0]:
		default:
		}
	}
	// full is closed: the reader is done and readErr is safe to read.
	if readErr != nil {
		return fmt.Errorf("load keys: %w", readErr)
	}
	s.log.Info("duckstore: dedup keys loaded", "keys", s.keys.len(), "took", time.Since(start))
	return nil
}

// enter registers an operation, refusing once Close has begun.
func (s *Store) enter(op string) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return fmt.Errorf("duckstore: %s: %w", op, store.ErrClosed)
	}
	s.ops.Add(1)
	return nil
}

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
	s.life.Lock()
	if s.closed {
		s.life.Unlock()
		return nil
	}
	s.closed = true
	s.life.Unlock()
	s.ops.Wait()
	var errs []error
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
