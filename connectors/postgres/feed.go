package postgres

// The change feed of a Mirror sync (connectors.ChangeFeed) through logical
// replication: a pgoutput slot named after the feed, and a publication of
// the table (the feed's own, or the one the `publication` field names).
// These two objects are all a feed creates in the warehouse: no table, no
// row. The replication connection uses the source's own settings and
// credentials; it runs replication commands and CREATE/DROP PUBLICATION
// only, while catalog look-ups and the fetch of unchanged TOASTed values
// go through the pool's read-only transactions like every read.
//
// feed_catalog.go checks the table and computes its shape; feed_stream.go
// decodes the stream into batches.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/tributary-dev/tributary/connectors"
)

var _ connectors.ChangeFeed = (*Source)(nil)

// feedName is what a slot name may be (PostgreSQL's own rule, which the
// replication commands take unquoted); publication names use the same
// rule plus upper case, so both are safe to splice into a command.
var (
	feedName        = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)
	publicationName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

func checkPublication(p string) error {
	if p != "" && !publicationName.MatchString(p) {
		return &connectors.FieldError{Field: "source.publication", Msg: "must be a plain identifier (letters, digits, underscores; at most 63)"}
	}
	return nil
}

func checkFeed(f connectors.Feed) error {
	if !feedName.MatchString(f.Name) {
		return fmt.Errorf("%w: feed name %q: lower-case letters, digits and underscores only, at most 63", connectors.ErrBadRequest, f.Name)
	}
	if f.Table.Name == "" || f.Table.Query != "" {
		return fmt.Errorf("%w: a query has no change feed", connectors.ErrFeedUnavailable)
	}
	if len(f.Key) == 0 {
		return fmt.Errorf("%w: feed %s has no key columns", connectors.ErrBadRequest, f.Name)
	}
	return nil
}

// position is a feed position: the WAL position to resume from, and the
// table's relation OID and column fingerprint when the feed started, so
// a table dropped and recreated, or altered, is noticed even when the
// stream says nothing about it (a recreated table is not in the
// publication). Rendered "LSN;oid;fingerprint".
type position struct {
	lsn   pglogrepl.LSN
	rel   uint32
	shape uint64
}

func (p position) String() string {
	return fmt.Sprintf("%s;%d;%016x", p.lsn, p.rel, p.shape)
}

func parsePosition(s string) (position, error) {
	parts := strings.Split(s, ";")
	if len(parts) != 3 {
		return position{}, fmt.Errorf("%w: malformed position %q", connectors.ErrFeedLost, s)
	}
	lsn, err1 := pglogrepl.ParseLSN(parts[0])
	rel, err2 := strconv.ParseUint(parts[1], 10, 32)
	shape, err3 := strconv.ParseUint(parts[2], 16, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return position{}, fmt.Errorf("%w: malformed position %q", connectors.ErrFeedLost, s)
	}
	return position{lsn: lsn, rel: uint32(rel), shape: shape}, nil
}

func (s *Source) publicationOf(f connectors.Feed) string {
	if s.publication != "" {
		return s.publication
	}
	return f.Name
}

// replicationConn opens a walsender connection with the pool's settings.
func (s *Source) replicationConn(ctx context.Context, op string) (*pgconn.PgConn, error) {
	cfg := s.pool.Config().ConnConfig.Config // a deep copy
	params := make(map[string]string, len(cfg.RuntimeParams)+1)
	for k, v := range cfg.RuntimeParams {
		params[k] = v
	}
	params["replication"] = "database"
	params["application_name"] = "tributary-feed"
	cfg.RuntimeParams = params
	// The stream is read with short deadlines while idle (feed_stream.go):
	// a deadline must only time the read out, not send the walsender a
	// cancel request as the pool's connections do.
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
	}
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend { return pgproto3.NewFrontend(r, w) }
	conn, err := pgconn.ConnectConfig(ctx, &cfg)
	if err != nil {
		return nil, feedError(ctx, op, err)
	}
	return conn, nil
}

// feedError classifies err like classify, and makes what no retry can
// fix about the warehouse's setup ErrFeedUnavailable: no REPLICATION
// attribute or table ownership, no pg_hba entry for replication, every
// slot in use, wal_level not logical.
func feedError(ctx context.Context, op string, err error) error {
	var pgErr *pgconn.PgError
	if ctx.Err() == nil && errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42501", "28000", "28P01", "53400", "55000":
			return fmt.Errorf("postgres source: %s: %w: %s (%s)", op, connectors.ErrFeedUnavailable, pgErr.Message, pgErr.Code)
		}
	}
	return classify(ctx, op, err)
}

// closeConn closes a replication connection within a few seconds.
func closeConn(conn *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// StartFeed implements connectors.ChangeFeed: it checks that the table
// can be fed exactly (else ErrFeedUnavailable, see feedShape), then
// creates the publication (unless the source names its own) and, after
// it, the slot, whose consistent point is the position returned. A
// previous slot and publication of the feed are dropped first.
func (s *Source) StartFeed(ctx context.Context, f connectors.Feed) (string, error) {
	if err := checkFeed(f); err != nil {
		return "", err
	}
	op := "start change feed " + f.Name
	shape, err := s.feedShape(ctx, f, true)
	if err != nil {
		return "", err
	}
	conn, err := s.replicationConn(ctx, op)
	if err != nil {
		return "", err
	}
	defer closeConn(conn)
	if err := s.dropSlot(ctx, conn, f.Name); err != nil {
		return "", err
	}
	own := s.publication == ""
	if own {
		// Dropped and created again rather than kept: a publication of a
		// table that was dropped and recreated lists nothing.
		pub := connectors.QuoteIdent(f.Name)
		for _, sql := range []string{"DROP PUBLICATION IF EXISTS " + pub, "CREATE PUBLICATION " + pub + " FOR TABLE " + connectors.QuoteTable(f.Table.Name)} {
			if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
				return "", feedError(ctx, op, err)
			}
		}
	}
	// The slot comes after the publication: pgoutput looks the
	// publication up as of each change it decodes.
	res, err := pglogrepl.CreateReplicationSlot(ctx, conn, f.Name, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	if err != nil {
		if own {
			// Nothing is left behind by a feed that did not start.
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = conn.Exec(cctx, "DROP PUBLICATION IF EXISTS "+connectors.QuoteIdent(f.Name)).ReadAll()
			cancel()
		}
		return "", feedError(ctx, op, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return "", fmt.Errorf("postgres source: %s: consistent point %q: %w", op, res.ConsistentPoint, err)
	}
	return position{lsn: lsn, rel: shape.rel, shape: shape.fingerprint}.String(), nil
}

// dropSlot drops the feed's slot if it exists. A slot still held by a
// walsender that is going away (a Changes that just ended or was cut
// off) is waited for a little.
func (s *Source) dropSlot(ctx context.Context, conn *pgconn.PgConn, name string) error {
	st, err := s.slotState(ctx, name, true)
	if err != nil || !st.exists {
		return err
	}
	if st.foreign != "" {
		// Another install's (or another database's) feed of the same
		// project and import ids: dropping it would make that one re-diff
		// its table, so this feed steps aside and its import re-diffs.
		return fmt.Errorf("%w: replication slot %s is %s, not this feed's; slot names are shared by the whole cluster, so this import re-diffs its table each run (give it another import id to use a feed)",
			connectors.ErrFeedUnavailable, name, st.foreign)
	}
	err = pglogrepl.DropReplicationSlot(ctx, conn, name, pglogrepl.DropReplicationSlotOptions{})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42704" { // gone meanwhile
		return nil
	}
	if err != nil {
		return feedError(ctx, "drop replication slot "+name, err)
	}
	return nil
}

// DropFeed implements connectors.ChangeFeed: it drops the slot and the
// feed's own publication (a named one is the user's and stays). Without
// either there is nothing to do, and no replication connection is made,
// so a source whose feed never started (no privilege) drops fine.
func (s *Source) DropFeed(ctx context.Context, f connectors.Feed) error {
	if !feedName.MatchString(f.Name) {
		return fmt.Errorf("%w: feed name %q", connectors.ErrBadRequest, f.Name)
	}
	op := "drop change feed " + f.Name
	st, err := s.slotState(ctx, f.Name, false)
	if err != nil {
		return err
	}
	pub := false
	if s.publication == "" {
		if pub, err = s.publicationExists(ctx, f.Name); err != nil {
			return err
		}
	}
	ownSlot := st.exists && st.foreign == "" // another database's slot of this name stays
	if !ownSlot && !pub {
		return nil
	}
	conn, err := s.replicationConn(ctx, op)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if ownSlot {
		if err := s.dropSlot(ctx, conn, f.Name); err != nil {
			return err
		}
	}
	if pub {
		if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+connectors.QuoteIdent(f.Name)).ReadAll(); err != nil {
			return feedError(ctx, op, err)
		}
	}
	return nil
}

// ConfirmFeed implements connectors.ChangeFeed: a short replication
// session from pos whose only message is a standby status update with
// flush and apply at pos, which moves the slot's confirmed_flush_lsn so
// the server may recycle the WAL before it. The server's answer to the
// update (a keepalive) proves it was processed before the session ends.
// Changes also confirms its starting position, which is committed too,
// and that is where the slot's restart_lsn advances: only a session that
// decodes finds the points it may advance to.
func (s *Source) ConfirmFeed(ctx context.Context, f connectors.Feed, pos string) error {
	if !feedName.MatchString(f.Name) {
		return fmt.Errorf("%w: feed name %q", connectors.ErrBadRequest, f.Name)
	}
	p, err := parsePosition(pos)
	if err != nil {
		return err
	}
	op := "confirm change feed " + f.Name
	st, err := s.slotState(ctx, f.Name, true)
	if err != nil {
		return err
	}
	if !st.exists {
		return fmt.Errorf("postgres source: %s: %w: replication slot %s does not exist", op, connectors.ErrFeedLost, f.Name)
	}
	if st.confirmed >= p.lsn {
		return nil
	}
	conn, err := s.replicationConn(ctx, op)
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if err := s.startReplication(ctx, conn, f, p.lsn); err != nil {
		return err
	}
	if err := s.awaitReply(ctx, conn, p.lsn); err != nil {
		return feedError(ctx, op, err)
	}
	endCopy(conn)
	return nil
}

// startReplication starts streaming the slot from lsn with pgoutput in
// binary mode: each value arrives in the binary format Read asks for,
// so it is decoded by the same code into the same Arrow types.
func (s *Source) startReplication(ctx context.Context, conn *pgconn.PgConn, f connectors.Feed, lsn pglogrepl.LSN) error {
	err := pglogrepl.StartReplication(ctx, conn, f.Name, lsn, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			// Quoted: pgoutput folds an unquoted name to lower case.
			"publication_names '\"" + s.publicationOf(f) + "\"'",
			"binary 'true'",
		},
	})
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42704", // the slot or the publication is gone
			"55000": // the slot was invalidated (max_slot_wal_keep_size)
			return fmt.Errorf("postgres source: stream change feed %s: %w: %s", f.Name, connectors.ErrFeedLost, pgErr.Message)
		}
	}
	return feedError(ctx, "stream change feed "+f.Name, err)
}

// awaitReply sends a status update confirming lsn and asking for a reply,
// and reads the stream until the server's keepalive answers it.
func (s *Source) awaitReply(ctx context.Context, conn *pgconn.PgConn, lsn pglogrepl.LSN) error {
	if err := sendStatus(ctx, conn, lsn, true); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		msg, err := conn.ReceiveMessage(wctx)
		if err != nil {
			return err
		}
		if e, ok := msg.(*pgproto3.ErrorResponse); ok {
			return pgconn.ErrorResponseToPgError(e)
		}
		if ka, ok := keepalive(msg); ok && !ka.ReplyRequested {
			return nil
		}
	}
}

// sendStatus reports lsn as written, flushed and applied: everything
// before it is committed in Tributary's store.
func sendStatus(ctx context.Context, conn *pgconn.PgConn, lsn pglogrepl.LSN, reply bool) error {
	return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn, WALFlushPosition: lsn, WALApplyPosition: lsn, ReplyRequested: reply,
	})
}

// endCopy ends the replication session, so the walsender releases the
// slot now rather than when it notices the connection is gone (the next
// session would find the slot still active).
func endCopy(conn *pgconn.PgConn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = pglogrepl.SendStandbyCopyDone(context.Background(), conn)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		closeConn(conn) // unblocks the goroutine
		<-done
	}
}
