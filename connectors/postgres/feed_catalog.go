package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tributary-dev/tributary/connectors"
)

// readOnly runs fn in the read-only transaction every read uses.
func (s *Source) readOnly(ctx context.Context, op string, fn func(conn *pgxpool.Conn) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(ctx, op, err)
	}
	defer release(ctx, conn, false)
	if err := beginReadOnly(ctx, conn); err != nil {
		return classify(ctx, op, err)
	}
	defer rollback(conn)
	return fn(conn)
}

// shape is what a feed knows of its table: the relation, its columns'
// fingerprint, and the batch columns with where each is in the tuples
// pgoutput sends.
type shape struct {
	rel         uint32
	fingerprint uint64
	cols        []column // batch columns after $op, typed as Read types them
	tupleIdx    []int    // cols[i] is value tupleIdx[i] of a tuple
	keyIdx      []int    // indexes in cols of the key columns, in key order
	keyTypes    []uint32 // their type OIDs, to look a row up by key
	tupleCols   int      // values in a tuple: the columns that are not generated
}

// relColumn is a column of the table as pg_attribute has it.
type relColumn struct {
	name      string
	typ       uint32
	typmod    int32
	generated bool
	enum      bool
}

// fingerprint hashes what pgoutput's Relation message says of a table
// (names, types, modifiers of the columns it sends), so a change of
// either side's view of the table is noticed.
func fingerprint(names []string, types []uint32, mods []int32) uint64 {
	h := fnv.New64a()
	for i := range names {
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", names[i], types[i], mods[i])
	}
	return h.Sum64()
}

// feedShape checks that f's table can be fed exactly and describes it.
// What makes it impossible is ErrFeedUnavailable: a server without
// logical replication (before 14, a standby, Redshift), wal_level not
// logical, not an ordinary logged table, no replica identity to carry the
// key of a delete (a publication would then even make the table's UPDATEs
// and DELETEs fail, so none is created), a generated column asked for
// (pgoutput does not send them), a column whose type Read takes as text
// (a binary stream cannot render it the same), or a publication that does not
// publish the whole table.
func (s *Source) feedShape(ctx context.Context, f connectors.Feed, starting bool) (*shape, error) {
	op := "change feed " + f.Name
	unavailable := func(format string, args ...any) error {
		return fmt.Errorf("postgres source: %s: %w: %s", op, connectors.ErrFeedUnavailable, fmt.Sprintf(format, args...))
	}
	var out *shape
	err := s.readOnly(ctx, op, func(conn *pgxpool.Conn) error {
		if starting {
			var level string
			var version int
			var standby bool
			err := conn.QueryRow(ctx, `SELECT current_setting('wal_level'), current_setting('server_version_num')::int,
				pg_catalog.pg_is_in_recovery()`).Scan(&level, &version, &standby)
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr): // a wire-compatible server without them (Redshift)
				return unavailable("the server has no logical replication (%s)", pgErr.Message)
			case err != nil:
				return classify(ctx, op, err)
			case level != "logical":
				return unavailable("wal_level is %s, logical replication needs logical", level)
			case version < 140000: // pgoutput's binary mode
				return unavailable("PostgreSQL %d.%d is older than 14", version/10000, version%10000)
			case standby:
				return unavailable("the server is a standby; connect to the primary")
			}
		}
		var rel uint32
		var kind, ident, persistence string
		err := conn.QueryRow(ctx, `SELECT c.oid, c.relkind::text, c.relreplident::text, c.relpersistence::text FROM pg_catalog.pg_class c
			WHERE c.oid = pg_catalog.to_regclass($1)`, connectors.QuoteTable(f.Table.Name)).Scan(&rel, &kind, &ident, &persistence)
		if errors.Is(err, pgx.ErrNoRows) {
			if starting {
				return connectors.Permanent(fmt.Errorf("postgres source: %s: %w: table %s", op, connectors.ErrNotFound, f.Table.Name))
			}
			return fmt.Errorf("postgres source: %s: %w: table %s no longer exists", op, connectors.ErrFeedLost, f.Table.Name)
		}
		if err != nil {
			return classify(ctx, op, err)
		}
		if kind != "r" {
			return unavailable("%s is not an ordinary table", f.Table.Name)
		}
		if persistence != "p" {
			// An unlogged table's changes are not in the WAL at all.
			return unavailable("%s is an unlogged or temporary table", f.Table.Name)
		}
		cols, err := relColumns(ctx, conn, rel)
		if err != nil {
			return classify(ctx, op, err)
		}
		identity, err := identityColumns(ctx, conn, rel, ident, cols)
		if err != nil {
			return classify(ctx, op, err)
		}
		for _, k := range f.Key {
			if !slices.Contains(identity, k) {
				return unavailable("key column %q is not in the table's replica identity (ALTER TABLE … REPLICA IDENTITY FULL, or a primary key holding it)", k)
			}
		}
		out = &shape{rel: rel}
		var names []string
		var types []uint32
		var mods []int32
		pos := map[string]int{}
		byName := map[string]relColumn{}
		for _, c := range cols {
			byName[c.name] = c
			if !c.generated {
				pos[c.name] = len(names)
				names, types, mods = append(names, c.name), append(types, c.typ), append(mods, c.typmod)
			}
		}
		out.fingerprint, out.tupleCols = fingerprint(names, types, mods), len(names)
		want := f.Columns
		if len(want) == 0 {
			for _, c := range cols {
				want = append(want, c.name)
			}
		}
		for _, k := range f.Key {
			if !slices.Contains(want, k) {
				want = append(want, k)
			}
		}
		quoted := make([]string, len(want))
		for i, name := range want {
			c, ok := byName[name]
			switch {
			case !ok && !starting: // dropped since the feed started
				return fmt.Errorf("postgres source: %s: %w: column %q of %s no longer exists", op, connectors.ErrFeedLost, name, f.Table.Name)
			case !ok:
				return connectors.Permanent(fmt.Errorf("postgres source: %s: %w: column %q of %s", op, connectors.ErrNotFound, name, f.Table.Name))
			case c.generated:
				return unavailable("column %q is generated, and logical replication does not send generated columns", name)
			}
			quoted[i] = connectors.QuoteIdent(name)
			out.tupleIdx = append(out.tupleIdx, pos[name])
		}
		// The batch columns are typed by preparing the SELECT Read runs,
		// so they are Read's types by construction.
		sd, err := conn.Conn().PgConn().Prepare(ctx, "", "SELECT "+strings.Join(quoted, ", ")+" FROM "+connectors.QuoteTable(f.Table.Name), nil)
		if err != nil {
			return classify(ctx, op, err)
		}
		for i, fd := range sd.Fields {
			c := newColumn(fd.Name, fd.DataTypeOID, fd.TypeModifier)
			if c.format != pgtype.BinaryFormatCode && !byName[want[i]].enum {
				return unavailable("column %q has a type (%d) read as text, which the binary change stream cannot render the same way", want[i], fd.DataTypeOID)
			}
			out.cols = append(out.cols, c)
		}
		for _, k := range f.Key {
			i := slices.Index(want, k)
			out.keyIdx = append(out.keyIdx, i)
			out.keyTypes = append(out.keyTypes, byName[k].typ)
		}
		// A feed's own publication is checked once it exists: a table
		// taken out of it would silently stop reporting changes.
		if !starting || s.publication != "" {
			return publishesTable(ctx, conn, s.publicationOf(f), rel, len(names), unavailable)
		}
		return nil
	})
	return out, err
}

func relColumns(ctx context.Context, conn *pgxpool.Conn, rel uint32) ([]relColumn, error) {
	rows, err := conn.Query(ctx, `SELECT a.attname, a.atttypid, a.atttypmod, a.attgenerated <> '', t.typtype = 'e'
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, rel)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (relColumn, error) {
		var c relColumn
		err := r.Scan(&c.name, &c.typ, &c.typmod, &c.generated, &c.enum)
		return c, err
	})
}

// identityColumns lists the columns a delete's old tuple carries: the
// primary key's (REPLICA IDENTITY DEFAULT), the chosen index's (USING
// INDEX), every column (FULL), or none (NOTHING, or DEFAULT without a
// primary key).
func identityColumns(ctx context.Context, conn *pgxpool.Conn, rel uint32, ident string, cols []relColumn) ([]string, error) {
	if ident == "f" {
		names := make([]string, len(cols))
		for i, c := range cols {
			names[i] = c.name
		}
		return names, nil
	}
	rows, err := conn.Query(ctx, `SELECT a.attname FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
		WHERE i.indrelid = $1 AND CASE $2 WHEN 'd' THEN i.indisprimary WHEN 'i' THEN i.indisreplident ELSE false END`, rel, ident)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// publishesTable checks that publication pub publishes inserts,
// updates and deletes of every column of the table, with no row filter:
// the feed must report what a full read sees.
func publishesTable(ctx context.Context, conn *pgxpool.Conn, pub string, rel uint32, ncols int, unavailable func(string, ...any) error) error {
	var all, noFilter bool
	var n int
	err := conn.QueryRow(ctx, `SELECT p.pubinsert AND p.pubupdate AND p.pubdelete, pt.rowfilter IS NULL, cardinality(pt.attnames)
		FROM pg_catalog.pg_publication p
		JOIN pg_catalog.pg_publication_tables pt ON pt.pubname = p.pubname
		JOIN pg_catalog.pg_class c ON c.relname = pt.tablename
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace AND n.nspname = pt.schemaname
		WHERE p.pubname = $1 AND c.oid = $2`, pub, rel).Scan(&all, &noFilter, &n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return unavailable("publication %s does not exist or does not include the table", pub)
	case err != nil:
		return classify(ctx, "check publication "+pub, err)
	case !all:
		return unavailable("publication %s does not publish inserts, updates and deletes", pub)
	case !noFilter || n != ncols:
		return unavailable("publication %s has a row filter or a column list for the table", pub)
	}
	return nil
}

// slot is a replication slot as pg_replication_slots shows it.
type slot struct {
	exists    bool
	confirmed pglogrepl.LSN
	lost      bool // invalidated: the WAL it needs was removed
	active    bool
	// foreign: a slot of this name in another database of the cluster
	// (slot names are cluster-wide): another feed's, so never dropped by
	// this one.
	foreign string
}

// slotState looks the slot up. With wait, a slot still held by a
// walsender is polled for a few seconds: the feed's own previous session
// releases it as its process ends.
func (s *Source) slotState(ctx context.Context, name string, wait bool) (slot, error) {
	op := "look up replication slot " + name
	deadline := time.Now().Add(10 * time.Second)
	for {
		var st slot
		err := s.readOnly(ctx, op, func(conn *pgxpool.Conn) error {
			var confirmed *string
			var status string
			var ours, here bool
			var db string
			err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, coalesce(wal_status, ''), active,
				coalesce(plugin = 'pgoutput' AND database = current_database(), false),
				coalesce(database = current_database(), false), coalesce(database, '')
				FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, name).Scan(&confirmed, &status, &st.active, &ours, &here, &db)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return classify(ctx, op, err)
			}
			// A slot of this name that is not a pgoutput slot of this
			// database is not the feed's: it cannot be streamed.
			st.exists, st.lost = true, status == "lost" || !ours
			if !here {
				st.foreign = "a physical slot"
				if db != "" {
					st.foreign = fmt.Sprintf("a slot of database %q", db)
				}
			}
			if confirmed != nil {
				if st.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
					return fmt.Errorf("postgres source: %s: %w", op, err)
				}
			}
			return nil
		})
		// Only the feed's own slot is waited for; another database's is
		// never dropped, so its walsender is not this feed's to outlast.
		if err != nil || !wait || !st.active || st.foreign != "" || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Source) publicationExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := s.readOnly(ctx, "look up publication "+name, func(conn *pgxpool.Conn) error {
		err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1)", name).Scan(&ok)
		return classify(ctx, "look up publication "+name, err)
	})
	return ok, err
}

// walFlushed is the WAL position up to which a Changes call reports:
// everything committed before the call is flushed before it (commits
// with synchronous_commit off may trail by the WAL writer's delay and
// come in the next call), and the walsender streams up to this point.
func (s *Source) walFlushed(ctx context.Context) (pglogrepl.LSN, error) {
	var lsn pglogrepl.LSN
	err := s.readOnly(ctx, "read the WAL position", func(conn *pgxpool.Conn) error {
		var text string
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_current_wal_flush_lsn()::text").Scan(&text); err != nil {
			return classify(ctx, "read the WAL position", err)
		}
		var err error
		lsn, err = pglogrepl.ParseLSN(text)
		return err
	})
	return lsn, err
}
