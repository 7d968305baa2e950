package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tributary-dev/tributary/connectors"
)

const (
	// pingEvery is how long the stream may be silent before the feed
	// asks the server where it is (a status update asking for a reply).
	pingEvery = 100 * time.Millisecond
	// idleAnswers ends a Changes call whose pings the walsender answers
	// this many times in a row with the same position, outside a
	// transaction: it is waiting for WAL, having sent everything up to
	// the end of the last complete record flushed. The end read at the
	// start may lie beyond that record (the WAL writer flushes whole
	// pages, so the flush position can cut a record in two), and only a
	// committed transaction's commit record is sure to be complete. A
	// walsender busy decoding a long transaction does not answer, so it
	// is never taken for idle.
	idleAnswers = 3
)

// Changes implements connectors.ChangeFeed. It first checks that the
// feed can continue from pos (slot present and not behind pos, table
// neither recreated nor altered; otherwise ErrFeedLost), reads the WAL
// flush position as the end, then streams from pos. pgoutput sends a
// transaction only once it committed (a rolled-back one never appears),
// so every change seen is committed; the stream stops after the first
// commit at or past the end, or at the first keepalive at or past it
// between transactions, or when the walsender has sent all it can (see
// idleAnswers), and returns the position of that commit or keepalive:
// resuming there replays nothing already reported. A cut connection (the
// walsender terminated, a network error) is a plain, retryable error;
// batches already given to fn are replayed by the retry.
//
// A batch's columns are $op, then f.Columns in their order (the table's,
// in table order, when empty), then any key column not among them, typed
// as Read types them.
//
// The stream confirms pos, which the caller has committed, so the slot
// releases the WAL before it as this session decodes.
func (s *Source) Changes(ctx context.Context, f connectors.Feed, pos string, fn func(arrow.RecordBatch) error) (string, error) {
	next, err := s.changes(ctx, f, pos, fn)
	// What makes a feed unavailable (the role lost REPLICATION, the
	// table lost its replica identity) also ends this one.
	if errors.Is(err, connectors.ErrFeedUnavailable) && !errors.Is(err, connectors.ErrFeedLost) {
		err = fmt.Errorf("%w: %w", connectors.ErrFeedLost, err)
	}
	return next, err
}

func (s *Source) changes(ctx context.Context, f connectors.Feed, pos string, fn func(arrow.RecordBatch) error) (string, error) {
	if err := checkFeed(f); err != nil {
		return "", err
	}
	p, err := parsePosition(pos)
	if err != nil {
		return "", err
	}
	op := "stream change feed " + f.Name
	lost := func(format string, args ...any) error {
		return fmt.Errorf("postgres source: %s: %w: %s", op, connectors.ErrFeedLost, fmt.Sprintf(format, args...))
	}
	// The end is read before the catalog, so the catalog check sees
	// every ALTER or DROP committed before the end.
	end, err := s.walFlushed(ctx)
	if err != nil {
		return "", err
	}
	st, err := s.slotState(ctx, f.Name, true)
	switch {
	case err != nil:
		return "", err
	case !st.exists:
		return "", lost("replication slot %s does not exist", f.Name)
	case st.lost:
		return "", lost("replication slot %s was invalidated (the WAL it needed was removed) or is not a pgoutput slot of this database", f.Name)
	case st.confirmed > p.lsn:
		return "", lost("position %s is older than the slot's confirmed position %s", p.lsn, st.confirmed)
	}
	sh, err := s.feedShape(ctx, f, false)
	if err != nil {
		return "", err
	}
	if sh.rel != p.rel {
		return "", lost("table %s was dropped and recreated", f.Table.Name)
	}
	if sh.fingerprint != p.shape {
		return "", lost("the columns of %s changed", f.Table.Name)
	}
	if end <= p.lsn {
		return pos, nil
	}

	conn, err := s.replicationConn(ctx, op)
	if err != nil {
		return "", err
	}
	defer closeConn(conn)
	if err := s.startReplication(ctx, conn, f, p.lsn); err != nil {
		return "", err
	}
	d := &decoder{s: s, f: f, sh: sh, b: newBatcher(sh.cols, keepAliveDuring(ctx, conn, p.lsn, fn)), lost: lost}
	defer d.b.release()
	defer d.closeFetch(ctx)
	next, err := d.run(ctx, conn, p.lsn, end)
	if err != nil {
		var fe fnError
		if errors.As(err, &fe) {
			return "", fe.err
		}
		if errors.Is(err, connectors.ErrFeedLost) {
			return "", err
		}
		return "", feedError(ctx, op, err)
	}
	if err := d.b.flush(); err != nil {
		return "", err.(fnError).err
	}
	endCopy(conn)
	p.lsn = next
	return p.String(), nil
}

// decoder turns one session's pgoutput messages into change batches.
type decoder struct {
	s    *Source
	f    connectors.Feed
	sh   *shape
	b    *batcher
	lost func(string, ...any) error
	vals [][]byte // one row's values, reused
	// fetch is the pooled connection, in a read-only transaction, that
	// reads unchanged TOASTed values; taken at the first one and kept for
	// the call (READ COMMITTED holds no snapshot between statements, so
	// this holds back no vacuum).
	fetch *pgxpool.Conn
}

// run reads the stream from start until end (see Changes) and returns
// the position to resume from.
func (d *decoder) run(ctx context.Context, conn *pgconn.PgConn, start, end pglogrepl.LSN) (pglogrepl.LSN, error) {
	if err := sendStatus(ctx, conn, start, true); err != nil {
		return 0, err
	}
	next := start
	inTx := false
	// The walsender's last reported position, and how many answers in a
	// row reported it. While it catches up from the slot's restart point
	// its position moves, and may be below the one it reported first.
	last, idle := pglogrepl.LSN(0), 0
	for {
		rctx, cancel := context.WithTimeout(ctx, pingEvery)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !pgconn.Timeout(err) {
				return 0, err
			}
			if err := sendStatus(ctx, conn, start, true); err != nil {
				return 0, err
			}
			continue
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			pgErr := pgconn.ErrorResponseToPgError(m)
			if pgErr.Code == "42704" || pgErr.Code == "55000" { // slot or publication gone, slot invalidated
				return 0, d.lost("%s", pgErr.Message)
			}
			return 0, pgErr
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return 0, err
				}
				// Only answers to pings count: a walsender busy in a
				// long decode sends a keepalive of its own (asking for a
				// reply) at wal_sender_timeout/2 without moving.
				if ka.ServerWALEnd != last {
					last, idle = ka.ServerWALEnd, 0
				} else if !ka.ReplyRequested {
					if idle++; !inTx && idle >= idleAnswers && last >= start {
						return max(next, last), nil
					}
				}
				// The walsender has decoded everything before its
				// position, so every transaction committed before it
				// was sent before this message.
				if !inTx && ka.ServerWALEnd >= end {
					return max(next, ka.ServerWALEnd), nil
				}
				if ka.ReplyRequested {
					if err := sendStatus(ctx, conn, start, false); err != nil {
						return 0, err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return 0, err
				}
				idle = 0
				lm, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					return 0, fmt.Errorf("decode pgoutput message: %w", err)
				}
				switch lm := lm.(type) {
				case *pglogrepl.BeginMessage:
					inTx = true
				case *pglogrepl.CommitMessage:
					inTx = false
					next = max(next, lm.TransactionEndLSN)
					if next >= end {
						return next, nil
					}
				default:
					batches := d.b.batches
					if err := d.change(ctx, lm); err != nil {
						return 0, err
					}
					// fn may take a while: a status update after each
					// batch keeps wal_sender_timeout from ending the
					// session while the stream waits for us.
					if d.b.batches != batches {
						if err := sendStatus(ctx, conn, start, false); err != nil {
							return 0, err
						}
					}
				}
			}
		case *pgproto3.CopyDone:
			return 0, errors.New("the server ended the replication stream")
		}
	}
}

// change handles one message inside a transaction.
func (d *decoder) change(ctx context.Context, m pglogrepl.Message) error {
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		if m.RelationID != d.sh.rel {
			return nil
		}
		names := make([]string, len(m.Columns))
		types := make([]uint32, len(m.Columns))
		mods := make([]int32, len(m.Columns))
		for i, c := range m.Columns {
			names[i], types[i], mods[i] = c.Name, c.DataType, c.TypeModifier
		}
		if fingerprint(names, types, mods) != d.sh.fingerprint {
			return d.lost("the columns of %s changed", d.f.Table.Name)
		}
	case *pglogrepl.TruncateMessage:
		for _, rel := range m.RelationIDs {
			if rel == d.sh.rel {
				return d.lost("%s was truncated", d.f.Table.Name)
			}
		}
	case *pglogrepl.InsertMessage:
		if m.RelationID == d.sh.rel {
			return d.row(ctx, connectors.ChangeInsert, m.Tuple)
		}
	case *pglogrepl.UpdateMessage:
		if m.RelationID != d.sh.rel {
			return nil
		}
		// The old tuple comes only when the replica identity changed
		// (or with REPLICA IDENTITY FULL); if the feed's key changed
		// with it, the old key's row is gone.
		if m.OldTuple != nil {
			changed, err := d.keyChanged(m.OldTuple, m.NewTuple)
			if err != nil {
				return err
			}
			if changed {
				if err := d.delete(m.OldTuple); err != nil {
					return err
				}
			}
		}
		return d.row(ctx, connectors.ChangeUpdate, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		if m.RelationID != d.sh.rel {
			return nil
		}
		if m.OldTuple == nil {
			return d.lost("a delete from %s carries no key (REPLICA IDENTITY NOTHING?)", d.f.Table.Name)
		}
		return d.delete(m.OldTuple)
	}
	return nil
}

func (d *decoder) tuple(t *pglogrepl.TupleData) error {
	if t == nil || len(t.Columns) != d.sh.tupleCols {
		return d.lost("a change of %s does not have the table's %d columns", d.f.Table.Name, d.sh.tupleCols)
	}
	return nil
}

// value is column i of the batch in tuple t: its bytes, whether it is a
// TOASTed value the update left unchanged (not sent), or an error.
func (d *decoder) value(t *pglogrepl.TupleData, i int) (v []byte, unchanged bool, err error) {
	c := t.Columns[d.sh.tupleIdx[i]]
	switch c.DataType {
	case pglogrepl.TupleDataTypeNull:
		return nil, false, nil
	case pglogrepl.TupleDataTypeToast:
		return nil, true, nil
	case pglogrepl.TupleDataTypeBinary:
		return c.Data, false, nil
	case pglogrepl.TupleDataTypeText:
		// Only a type without a binary send function comes as text;
		// feedShape admitted text only for such columns (enums).
		if d.sh.cols[i].format == pgtype.BinaryFormatCode {
			return nil, false, d.lost("column %s arrived as text", d.sh.cols[i].name)
		}
		return c.Data, false, nil
	}
	return nil, false, fmt.Errorf("column %s: unknown tuple value kind %q", d.sh.cols[i].name, c.DataType)
}

func (d *decoder) keyChanged(old, new *pglogrepl.TupleData) (bool, error) {
	if err := errors.Join(d.tuple(old), d.tuple(new)); err != nil {
		return false, err
	}
	for _, i := range d.sh.keyIdx {
		a, ua, err1 := d.value(old, i)
		b, ub, err2 := d.value(new, i)
		if err := errors.Join(err1, err2); err != nil {
			return false, err
		}
		if ua || ub {
			return false, d.lost("a key value of %s was not sent", d.f.Table.Name)
		}
		if !bytes.Equal(a, b) || (a == nil) != (b == nil) {
			return true, nil
		}
	}
	return false, nil
}

// delete adds a delete of the key old carries; the other columns are null.
func (d *decoder) delete(old *pglogrepl.TupleData) error {
	if err := d.tuple(old); err != nil {
		return err
	}
	d.vals = d.vals[:0]
	for range d.sh.cols {
		d.vals = append(d.vals, nil)
	}
	for _, i := range d.sh.keyIdx {
		v, unchanged, err := d.value(old, i)
		if err != nil {
			return err
		}
		if unchanged || v == nil {
			return d.lost("a delete from %s carries no value of key column %s", d.f.Table.Name, d.sh.cols[i].name)
		}
		d.vals[i] = v
	}
	return d.b.add(connectors.ChangeDelete, d.vals)
}

// row adds an insert or update of t. A TOASTed value the update did not
// change is not in the stream; it is read from the table by key (see
// fetchUnchanged), and if the row is no longer there the update is
// skipped: its delete is later in the stream.
func (d *decoder) row(ctx context.Context, op string, t *pglogrepl.TupleData) error {
	if err := d.tuple(t); err != nil {
		return err
	}
	d.vals = d.vals[:0]
	var missing []int
	for i := range d.sh.cols {
		v, unchanged, err := d.value(t, i)
		if err != nil {
			return err
		}
		if unchanged {
			missing = append(missing, i)
		}
		d.vals = append(d.vals, v)
	}
	if len(missing) > 0 {
		found, err := d.fetchUnchanged(ctx, missing)
		if err != nil || !found {
			return err
		}
	}
	return d.b.add(op, d.vals)
}

// statusEvery is how often the session reports its position while fn
// holds the stream.
const statusEvery = 500 * time.Millisecond

// keepAliveDuring wraps fn so that the session stays alive however long
// one call takes (a Mirror run applying a large group of changes on a
// large table): nothing reads the stream meanwhile, and a walsender that
// hears nothing for wal_sender_timeout ends the session, so a goroutine
// sends status updates (lsn, the committed position) until fn returns.
// It is the only user of conn meanwhile: the stream loop is inside fn's
// call. A failed update is left to that loop, which finds the connection
// broken at its next read.
func keepAliveDuring(ctx context.Context, conn *pgconn.PgConn, lsn pglogrepl.LSN, fn func(arrow.RecordBatch) error) func(arrow.RecordBatch) error {
	return func(rec arrow.RecordBatch) error {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(statusEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if sendStatus(ctx, conn, lsn, false) != nil {
						return
					}
				}
			}
		}()
		defer func() { close(stop); <-done }() // before the caller uses conn again
		return fn(rec)
	}
}
