package pgstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tributary-dev/tributary/ingest/store"
)

// Events reach their table by one of two paths.
//
//   - Fast: COPY straight into events, inside a savepoint. COPY inserts
//     rows in batches (one WAL record per heap page, no per-row executor
//     or speculative insertion), so the one index is the only per-row cost
//     left. It succeeds whenever no staged key is stored yet, which is
//     every write that carries no retried or re-read events.
//   - Slow: when the unique index refuses a key (unique_violation), the
//     savepoint is rolled back and the rows go through the connection's
//     staging table and INSERT … ON CONFLICT DO NOTHING, which skips the
//     stored keys and, for a key another transaction is inserting, waits for
//     that transaction's outcome.
//
// Both insert in the unique index's order, (project, time_ms, dedup_key). A
// writer only ever waits for a key that sorts before every key it has yet
// to insert, so two writers with overlapping keys cannot wait for each
// other: the later one waits, then skips (or, on the fast path, falls back).
//
// seq (arrival order, the scans' tie-break) is drawn before either path, in
// request order: nextval of event_seq reserves seqBlock values at a time.
//
// The index is what sizes the server: each event lands at its time, so live
// traffic keeps only the index's recent end in shared_buffers, but an
// import of old events spread over a range touches all of that range's
// pages (~60 bytes of index per event), and once those outgrow
// shared_buffers every event costs a page read and a dirty page write.

// seqBlock is event_seq's increment since migration 6.
const seqBlock = 1024

// uniqueViolation is PostgreSQL's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

var eventColumns = []string{"seq", "project", "time_ms", "name", "distinct_id", "insert_id", "dedup_key", "props", "ingest_ms"}

// insertEvents stores the staged events and corrects the batches' counts
// (plan counted every staged event as inserted) for keys already stored.
func (w *writeTx) insertEvents(ctx context.Context, res *store.WriteResult) error {
	if len(w.stage) == 0 {
		return nil
	}
	blocks, err := w.reserveSeqs(ctx)
	if err != nil {
		return err
	}
	src := &eventRows{w: w, blocks: blocks, order: w.keyOrder()}
	err = w.copyEvents(ctx, "events", src)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &pe) || pe.Code != uniqueViolation:
		return fmt.Errorf("insert events: %w", err)
	}
	// RELEASE after the rollback: what follows runs in the transaction
	// itself, not in a subtransaction of its own.
	if _, err := w.tx.Exec(ctx, `ROLLBACK TO SAVEPOINT pgstore_events; RELEASE SAVEPOINT pgstore_events`); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	return w.insertSkipping(ctx, src, res)
}

func (w *writeTx) copyEvents(ctx context.Context, table string, src *eventRows) error {
	src.reset()
	_, err := w.tx.Conn().PgConn().CopyFrom(ctx, src, `COPY `+table+` (`+strings.Join(eventColumns, ", ")+`) FROM STDIN (FORMAT binary)`)
	return err
}

// reserveSeqs opens the fast path's savepoint and reserves seq values for
// the staged events, in one round trip. Event i gets seqOf(blocks, i).
func (w *writeTx) reserveSeqs(ctx context.Context) ([]int64, error) {
	var b pgx.Batch
	b.Queue(`SAVEPOINT pgstore_events`)
	b.Queue(`SELECT nextval('event_seq') FROM generate_series(1, $1)`, (len(w.stage)+seqBlock-1)/seqBlock)
	br := w.tx.SendBatch(ctx, &b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	rows, _ := br.Query()
	blocks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("reserve seq: %w", err)
	}
	// Drawn in this order, so already ascending; sorted to not depend on it.
	slices.Sort(blocks)
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("reserve seq: %w", err)
	}
	return blocks, nil
}

func seqOf(blocks []int64, i int) int64 {
	return blocks[i/seqBlock] + int64(i%seqBlock)
}

// stageIndex inverts seqOf.
func stageIndex(blocks []int64, seq int64) (int, bool) {
	k := sort.Search(len(blocks), func(k int) bool { return blocks[k] > seq }) - 1
	if k < 0 || seq-blocks[k] >= seqBlock {
		return 0, false
	}
	return k*seqBlock + int(seq-blocks[k]), true
}

// keyOrder returns the indexes of w.stage in the unique index's order.
// Events without an insert id have a NULL key and conflict with nothing;
// they sort with the zero key.
func (w *writeTx) keyOrder() []int {
	order := make([]int, len(w.stage))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := &w.stage[a], &w.stage[b]
		if c := cmp.Compare(ra.project, rb.project); c != 0 {
			return c
		}
		if c := cmp.Compare(ra.e.TimeMs, rb.e.TimeMs); c != 0 {
			return c
		}
		return bytes.Compare(ra.key[:], rb.key[:])
	})
	return order
}

// insertSkipping is the slow path: stage every row, then insert those
// whose key is not stored. RETURNING seq names the rows inserted.
func (w *writeTx) insertSkipping(ctx context.Context, src *eventRows, res *store.WriteResult) error {
	if err := w.copyEvents(ctx, "pgstore_stage", src); err != nil {
		return fmt.Errorf("stage events: %w", err)
	}
	rows, err := w.tx.Query(ctx, `INSERT INTO events (seq, project, time_ms, name, distinct_id, insert_id, dedup_key, props, ingest_ms)
		SELECT seq, project, time_ms, name, distinct_id, insert_id, dedup_key, props, ingest_ms
		FROM pgstore_stage ORDER BY project, time_ms, dedup_key
		ON CONFLICT (project, time_ms, dedup_key) DO NOTHING
		RETURNING seq`)
	if err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	w.dup = make([]bool, len(w.stage))
	for i := range w.dup {
		w.dup[i] = true
	}
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&seq}, func() error {
		i, ok := stageIndex(src.blocks, seq)
		if !ok || i >= len(w.stage) {
			return fmt.Errorf("inserted seq %d is not one this write reserved", seq)
		}
		w.dup[i] = false
		return nil
	})
	if err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	for i, dup := range w.dup {
		if dup {
			b := &res.Batches[w.stage[i].batch]
			b.Inserted--
			b.Duplicates++
			b.DupEvents = append(b.DupEvents, w.stage[i].ev)
		}
	}
	return nil
}

// eventRows streams w.stage in the given order as COPY's binary format,
// which is what pgx's CopyFrom would send, without its per-value
// reflection and allocations: int8 as 8 bytes big-endian, text as its
// bytes, uuid as its 16 bytes, -1 as the length of a NULL.
type eventRows struct {
	w      *writeTx
	blocks []int64
	order  []int
	next   int // index into order of the next row to encode; len(order)+1 after the trailer
	buf    []byte
	off    int
}

var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

func (r *eventRows) reset() {
	r.next, r.off = 0, 0
	r.buf = append(r.buf[:0], copyHeader...)
}

func (r *eventRows) Read(p []byte) (int, error) {
	if r.off > 0 && len(r.buf)-r.off < len(p) {
		r.buf = append(r.buf[:0], r.buf[r.off:]...)
		r.off = 0
	}
	for len(r.buf) < len(p) && r.next <= len(r.order) {
		if r.next == len(r.order) {
			r.buf = binary.BigEndian.AppendUint16(r.buf, 0xffff) // the trailer
		} else {
			r.buf = r.appendRow(r.buf, r.order[r.next])
		}
		r.next++
	}
	if r.off == len(r.buf) {
		return 0, io.EOF
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

func (r *eventRows) appendRow(b []byte, i int) []byte {
	s := &r.w.stage[i]
	e := s.e
	b = binary.BigEndian.AppendUint16(b, uint16(len(eventColumns)))
	b = appendInt8(b, seqOf(r.blocks, i))
	b = appendInt8(b, s.project)
	b = appendInt8(b, e.TimeMs)
	b = appendText(b, e.Name)
	b = appendText(b, e.DistinctID)
	if e.Dedupable() {
		b = appendText(b, e.InsertID)
		b = binary.BigEndian.AppendUint32(b, 16)
		b = append(b, s.key[:]...)
	} else {
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	at := len(b)
	b = store.SpliceProps(append(b, 0, 0, 0, 0), e.Props, s.common)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return appendInt8(b, e.IngestMs)
}

func appendInt8(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func appendText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
