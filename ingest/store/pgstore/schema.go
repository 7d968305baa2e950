package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
)

// migrations[i] brings a schema from version i to i+1. Released entries
// never change: a new version appends one. Each runs in the transaction that
// records it in schema_migrations, so a crash leaves no half-migrated schema.
//
// Text that identifies things (names, ids, keys) is COLLATE "C": reads
// promise byte order ("ordered by id", "in key order"), which the database's
// default collation would not give, and "C" comparisons are the cheapest.
// JSON documents stay text rather than jsonb: events must read back byte for
// byte, and props::jsonb remains one cast away for ad-hoc SQL.
var migrations = []string{
	// 1: the first schema.
	`CREATE TABLE projects (
		project bigint PRIMARY KEY,
		id_mode text NOT NULL CHECK (id_mode IN ('original', 'simplified')));

	-- One sequence orders events by arrival. Its values are drawn when a
	-- write copies rows into its staging table (in request order), so the
	-- insert into events may go in key order, which is what keeps two
	-- writers racing on the same keys from deadlocking.
	CREATE SEQUENCE event_seq AS bigint;
	CREATE TABLE events (
		seq bigint NOT NULL DEFAULT nextval('event_seq'),
		project bigint NOT NULL,
		time_ms bigint NOT NULL,
		name text COLLATE "C" NOT NULL,
		distinct_id text COLLATE "C" NOT NULL,
		insert_id text COLLATE "C",
		dedup_key uuid, -- store.Key; NULL exactly when there is no insert id
		props text NOT NULL,
		ingest_ms bigint NOT NULL,
		CHECK ((insert_id IS NULL) = (dedup_key IS NULL)));
	ALTER SEQUENCE event_seq OWNED BY events.seq;
	CREATE UNIQUE INDEX events_dedup ON events (project, dedup_key) WHERE dedup_key IS NOT NULL;
	CREATE INDEX events_scan ON events (project, time_ms, seq);

	CREATE TABLE merges (
		seq bigserial PRIMARY KEY,
		project bigint NOT NULL,
		distinct_id_1 text COLLATE "C" NOT NULL,
		distinct_id_2 text COLLATE "C" NOT NULL,
		time_ms bigint NOT NULL,
		ingest_ms bigint NOT NULL,
		props text NOT NULL);
	CREATE INDEX merges_project ON merges (project, seq);

	-- Only changes that changed a cluster, in seq order per project:
	-- replaying them rebuilds a project's identity graph exactly.
	CREATE TABLE identity_changes (
		seq bigserial PRIMARY KEY,
		project bigint NOT NULL,
		kind smallint NOT NULL,
		a text COLLATE "C" NOT NULL,
		b text COLLATE "C" NOT NULL);
	CREATE INDEX identity_changes_project ON identity_changes (project, seq);

	-- The graph's answers, for reads: every id a change registered and its
	-- canonical id now. An id without a row is its own canonical id.
	CREATE TABLE identity_ids (
		project bigint NOT NULL,
		id text COLLATE "C" NOT NULL,
		canonical text COLLATE "C" NOT NULL,
		PRIMARY KEY (project, id));
	CREATE INDEX identity_ids_canonical ON identity_ids (project, canonical);

	CREATE TABLE profiles (
		project bigint NOT NULL,
		kind smallint NOT NULL,
		group_key text COLLATE "C" NOT NULL, -- '' for user profiles
		id text COLLATE "C" NOT NULL,
		props text NOT NULL,
		updated_ms bigint NOT NULL,
		PRIMARY KEY (project, kind, group_key, id));

	CREATE TABLE lookup_tables (
		project bigint NOT NULL,
		id text COLLATE "C" NOT NULL,
		columns text NOT NULL, -- JSON array of the column names
		row_count bigint NOT NULL,
		updated_ms bigint NOT NULL,
		PRIMARY KEY (project, id));
	CREATE TABLE lookup_rows (
		project bigint NOT NULL,
		table_id text COLLATE "C" NOT NULL,
		key text COLLATE "C" NOT NULL,
		row text NOT NULL,
		PRIMARY KEY (project, table_id, key));`,

	// 2: warehouse sync state (store.Syncs).
	`CREATE TABLE checkpoints (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		value bytea NOT NULL, -- opaque to the store; never empty (empty clears)
		PRIMARY KEY (project, import));

	CREATE TABLE sync_runs (
		id text COLLATE "C" PRIMARY KEY,
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		trigger text COLLATE "C" NOT NULL,
		period text COLLATE "C" NOT NULL, -- '' for unscheduled runs
		status text COLLATE "C" NOT NULL,
		reason text NOT NULL,
		started_ms bigint NOT NULL,
		ended_ms bigint NOT NULL,
		rows_read bigint NOT NULL,
		imported bigint NOT NULL,
		duplicate bigint NOT NULL,
		failed bigint NOT NULL,
		bytes bigint NOT NULL,
		failures text NOT NULL); -- JSON array
	-- History newest first, StartRun's search and the hourly count.
	CREATE INDEX sync_runs_import ON sync_runs (project, import, started_ms DESC, id DESC);
	-- StartRun decides under an advisory lock; this keeps a second running
	-- run of an import out even if something bypassed that lock.
	CREATE UNIQUE INDEX sync_runs_one_running ON sync_runs (project, import) WHERE status = 'RUNNING';

	CREATE TABLE import_docs (
		project bigint NOT NULL,
		id text COLLATE "C" NOT NULL,
		doc text NOT NULL,
		PRIMARY KEY (project, id));`,

	// 3: run leases. A RUNNING run names the process running it and when
	// its claim lapses; rows from before have no lease (0), which counts
	// as expired, so they are interrupted as the crashed runs they are.
	`ALTER TABLE sync_runs
		ADD COLUMN owner text COLLATE "C" NOT NULL DEFAULT '',
		ADD COLUMN lease_until_ms bigint NOT NULL DEFAULT 0;
	-- The periodic search for expired leases and a process's renewals
	-- read only running runs, a handful whatever the history's size.
	CREATE INDEX sync_runs_running ON sync_runs (lease_until_ms) INCLUDE (owner) WHERE status = 'RUNNING';`,

	// 4: monthly usage (store.Usage): events stored per project, month of
	// ingestion and source, added to in the transaction that stores them.
	// A counter is spread over a few slots (usage.go), summed on read.
	`CREATE TABLE usage_counters (
		project bigint NOT NULL,
		month text COLLATE "C" NOT NULL, -- YYYY-MM, UTC
		source text COLLATE "C" NOT NULL,
		slot smallint NOT NULL,
		events bigint NOT NULL,
		PRIMARY KEY (project, month, source, slot));`,

	// 5: what people and groups imports own (store.Members):
	// per profile, the names the last run that met it set and the names
	// earlier runs set that no run settled yet (JSON arrays).
	`CREATE TABLE import_members (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		kind smallint NOT NULL,
		group_key text COLLATE "C" NOT NULL, -- '' for user profiles
		id text COLLATE "C" NOT NULL,
		run_id text COLLATE "C" NOT NULL,
		names text NOT NULL,
		prev_names text NOT NULL,
		PRIMARY KEY (project, import, kind, group_key, id));`,

	// 6: one index on events instead of two, for /import's write rate
	// (insert.go). Every event's index entries were most of a write's
	// cost, and the dedup index, in random key order, dirtied (and after
	// each checkpoint wrote whole into the WAL) a page per event. Keys
	// cover the event time (store.DedupKey), so (project, time_ms,
	// dedup_key) is unique exactly when (project, dedup_key) is; led by
	// time, the index stays local for live traffic and serves the scans
	// too, which sort the rows of one time_ms by seq (few, already near).
	// NULL keys (no insert id) are distinct, so they never conflict.
	// nextval now reserves a block of seq values for a whole write.
	// Builds before this version fail their writes on this schema (their
	// ON CONFLICT names the old index) and refuse to start on it.
	`CREATE UNIQUE INDEX events_key ON events (project, time_ms, dedup_key);
	DROP INDEX events_dedup;
	DROP INDEX events_scan;
	ALTER SEQUENCE event_seq INCREMENT BY 1024;`,

	// 7: state the processes of one database share (shared.go): OAuth
	// tokens by SHA-256 (never the token), and each project's rate-limit
	// counter per minute.
	`CREATE TABLE oauth_tokens (
		hash bytea PRIMARY KEY,
		account text NOT NULL,
		expires_ms bigint NOT NULL);
	CREATE INDEX oauth_tokens_expiry ON oauth_tokens (expires_ms);
	CREATE TABLE rate_usage (
		project bigint NOT NULL,
		minute bigint NOT NULL,
		total bigint NOT NULL,
		PRIMARY KEY (project, minute));`,

	// 8: Mirror syncs' table states (mirror.go).
	mirrorMigration,

	// 9: the alert outbox, one row per alert and destination, leased by
	// the delivering process (alerts.go); and what each monitoring rule
	// remembers of an import.
	`CREATE TABLE alert_outbox (
		id text COLLATE "C" NOT NULL,
		destination text COLLATE "C" NOT NULL,
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		kind text NOT NULL,
		body text NOT NULL,
		created_ms bigint NOT NULL,
		attempts integer NOT NULL DEFAULT 0,
		next_ms bigint NOT NULL,
		last_error text NOT NULL DEFAULT '',
		status text NOT NULL DEFAULT 'pending',
		lease_owner text NOT NULL DEFAULT '',
		lease_until_ms bigint NOT NULL DEFAULT 0,
		settled_ms bigint NOT NULL DEFAULT 0,
		PRIMARY KEY (id, destination));
	CREATE INDEX alert_outbox_due ON alert_outbox (next_ms) WHERE status = 'pending';
	CREATE TABLE alert_states (
		project bigint NOT NULL,
		import text COLLATE "C" NOT NULL,
		rule text COLLATE "C" NOT NULL,
		state text NOT NULL,
		detail text NOT NULL,
		updated_ms bigint NOT NULL,
		PRIMARY KEY (project, import, rule));`,

	// 10: daily usage, beside the monthly (usage_daily.go).
	dailyUsageMigration,

	// 11: History tables' versions (history.go).
	historyMigration,

	// 12: the row-level ledger of sync runs and the quarantine of refused
	// rows (ledger.go).
	ledgerMigration,

	// 13: Mirror runs' table rows and Mirror imports' sources
	// (mirrorsource.go).
	mirrorSourcesMigration,

	// 14: the ledger keeps no copy of a key's text (ledger.go).
	ledgerKeyMigration,
}

// createStage makes the per-connection staging table of Write's slow path
// (insert.go). ON COMMIT DELETE ROWS empties it at every commit, so a write
// never sees another's rows, and a rollback discards them anyway.
const createStage = `CREATE TEMP TABLE IF NOT EXISTS pgstore_stage (
	seq bigint NOT NULL,
	project bigint NOT NULL,
	time_ms bigint NOT NULL,
	name text NOT NULL,
	distinct_id text NOT NULL,
	insert_id text,
	dedup_key uuid,
	props text NOT NULL,
	ingest_ms bigint NOT NULL) ON COMMIT DELETE ROWS`

// migrate brings the schema up to date on a connection of its own and
// returns the schema's name. The advisory lock makes processes that start
// together take turns: the first migrates, the others find it done.
func migrate(ctx context.Context, cfg *pgx.ConnConfig, schema string, log *slog.Logger) (string, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if schema == "" {
		var cur *string
		if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
			return "", fmt.Errorf("read current schema: %w", err)
		}
		if cur == nil {
			return "", errors.New("no schema of the search_path exists; set Options.Schema")
		}
		schema = *cur
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	defer rollback(ctx, tx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey(schema, nsMigrate, 0)); err != nil {
		return "", fmt.Errorf("migrate: lock: %w", err)
	}
	// DDL only when something is missing, so a role without CREATE
	// rights can open a schema its owner already migrated.
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	var have bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&have); err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	if !have {
		// Under the lock: CREATE SCHEMA IF NOT EXISTS alone still fails
		// when two sessions run it at once.
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return "", fmt.Errorf("migrate: create schema %q: %w", schema, err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE `+table+` (
			version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return "", fmt.Errorf("migrate: %w", err)
		}
	}
	var cur string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
		return "", fmt.Errorf("migrate: read current schema: %w", err)
	}
	if cur != schema {
		// Unqualified names would land in another schema than the locks name.
		return "", fmt.Errorf("migrate: the connection's schema is %q, want %q (a search_path in the dsn?)", cur, schema)
	}
	var version int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return "", fmt.Errorf("migrate: read version: %w", err)
	}
	if version > len(migrations) {
		return "", fmt.Errorf("schema %q is at version %d, this build knows up to %d", schema, version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if _, err := tx.Exec(ctx, migrations[v]); err != nil {
			return "", fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v+1); err != nil {
			return "", fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("migrate: commit: %w", err)
	}
	if version < len(migrations) {
		log.Info("pgstore: schema migrated", "schema", schema, "from", version, "to", len(migrations))
	}
	return schema, nil
}
