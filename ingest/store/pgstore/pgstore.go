// Package pgstore is a store.Store on PostgreSQL, for deployments that run
// several Tributary processes against one database.
//
// Every rule of the store contract holds across processes, not only across
// goroutines, because the database is the only shared state:
//
//   - Dedup is a unique index on (project, time_ms, dedup_key) (keys cover
//     the time). A Write COPYs its events in, or after a conflict inserts
//     them with ON CONFLICT DO NOTHING (insert.go), so two processes
//     racing on one key store it once and the loser counts a duplicate.
//   - Identity, profile and mode changes of a project are serialised by
//     transaction-scoped advisory locks (locks.go). Each process keeps a
//     replayable identity.Graph per project as a cache and catches it up
//     from identity_changes while holding the lock; reads never use the
//     cache, they read identity_ids, the materialised id → canonical map.
//   - Sync checkpoints commit in the Write transaction of the records they
//     cover; StartRun decides under an advisory lock of the import, with a
//     partial unique index (one RUNNING run per import) behind it (syncs.go).
//   - Durability is PostgreSQL's: Write returns after COMMIT, and every
//     connection runs with synchronous_commit=on whatever the server default.
package pgstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/internal/storekit"
)

// Options tune the store.
type Options struct {
	// Schema holds the tables; created if missing. "" uses the first schema
	// of the connection's search_path (usually public).
	Schema string
	// MaxConns bounds the connection pool; 0 keeps pgxpool's default
	// (4, or the number of CPUs if more).
	MaxConns int32
	Logger   *slog.Logger
}

// Store is a store.Store backed by PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	schema string // resolved at Open; part of every advisory lock key
	log    *slog.Logger

	// ops is the lifecycle guard: Close waits for operations in flight so
	// no query runs on a closing pool.
	ops storekit.Gate

	graphs graphCache // identity.go

	// pages are the row counts of scan pages; tests lower them to cross
	// page boundaries with little data.
	pages pageSizes
}

type pageSizes struct {
	scanFirst, scanMax int // ScanEvents: the first page, doubling up to the last
	profiles, lookups  int
}

func defaultPages() pageSizes {
	return pageSizes{scanFirst: 256, scanMax: 8192, profiles: 1000, lookups: 2000}
}

var _ store.Store = (*Store)(nil)

// Open connects to dsn (a libpq URL or keyword/value string), applies the
// schema migrations and returns a ready store.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse dsn: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	// An acknowledged write must survive a crash of the database server
	// too; a server configured for asynchronous commit would break that.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	// Every take-a-lock-then-read step (migrate, identity catch-up,
	// StartRun) needs the read to see what the previous lock holder
	// committed. Under a REPEATABLE READ default the snapshot would be
	// taken by the lock statement itself, before the wait.
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	schema, err := migrate(ctx, cfg.ConnConfig, opts.Schema, log)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	// Created on each new connection, after migrate made event_seq exist.
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, createStage)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s := &Store{pool: pool, schema: schema, log: log, graphs: graphCache{m: map[int64]*projectGraph{}}, pages: defaultPages()}
	if err := s.checkDurability(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	return s, nil
}

// checkDurability warns when the server cannot keep the durability promise
// whatever this client does; refusing to start would be harsher than the
// operator asked for (fsync=off is a deliberate choice, e.g. in tests).
func (s *Store) checkDurability(ctx context.Context) error {
	var fsync string
	if err := s.pool.QueryRow(ctx, `SHOW fsync`).Scan(&fsync); err != nil {
		return fmt.Errorf("check fsync: %w", err)
	}
	if fsync != "on" {
		s.log.Warn("pgstore: the PostgreSQL server runs with fsync=off: acknowledged writes can be lost in a crash")
	}
	return nil
}

// enter registers an operation, refusing once Close has begun.
func (s *Store) enter(op string) error { return s.ops.Enter("pgstore", op) }

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter("ping"); err != nil {
		return err
	}
	defer s.ops.Done()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}

// Close waits for operations in flight, then closes the pool. It must not
// be called from a scan callback. Later calls return nil.
func (s *Store) Close() error {
	if !s.ops.Shut() {
		return nil
	}
	s.ops.Wait()
	s.pool.Close()
	return nil
}

// rollback ends a transaction that did not commit. It ignores ctx: a
// cancelled caller must still give the connection back clean. Its error is
// dropped because pgx closes a connection whose ROLLBACK failed, and the
// caller already has the error that made it roll back.
func rollback(ctx context.Context, tx pgx.Tx) {
	_ = tx.Rollback(context.WithoutCancel(ctx))
}
