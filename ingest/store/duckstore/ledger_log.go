package duckstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/zeebo/xxh3"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/wal"
	"github.com/tributary-dev/tributary/internal/duckarrow"
)

// Ledger entries travel through the write log. Written by the sync into
// DuckDB apart from the loader (a transaction per 64k entries, a row per
// entry), they cost the sync a third to two fifths of its rate and
// ~25 MiB of peak RSS (syncbench, 1M rows, default memory budget): each
// small transaction was copied into DuckDB's WAL and compressed again by
// a checkpoint, and competed with the loader for DuckDB's memory. Logged,
// they cost an O_DSYNC write of ~17 bytes an entry, and the loader files
// them as pages (ledger.go) in its own transaction.
//
// A ledger entry of the log starts with ledgerMarker (never an event
// count, nor commonMarker), then: project, import, run, at_ms, the number
// of entries, and per entry its 16-byte key hash and its outcome byte;
// with ledgerDetail set in that byte, field and reason follow. Pages hold
// the entries in this form.
const (
	ledgerMarker = 1 << 41
	ledgerDetail = 0x80
	// ledgerWeight is how many ledger entries count as one row when the
	// loader sizes its transactions: an entry costs it a small fraction
	// of an event, and not counting them at all would let a run of
	// refusals alone grow one transaction without bound.
	ledgerWeight = 8
)

// logLedger is one logged batch of a run's entries; rows holds the
// entries as logged.
type logLedger struct {
	project  int64
	importID []byte
	run      []byte
	atMs     int64
	n        int
	rows     []byte
}

// logLedger appends a run's entries to the write log as one entry.
func (s *Store) logLedger(ctx context.Context, run store.LedgerRun, entries []store.LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	// Like a write, never let the loader fall more than maxLag behind.
	if err := s.waitFor(ctx, func() bool { return s.unapplied < s.maxLag }); err != nil {
		return err
	}
	size := wal.HeaderSize + 64 + len(run.Import) + len(run.Run) + len(entries)*(len(store.LedgerEntry{}.Hash)+1)
	for i := range entries {
		if e := &entries[i]; e.Field != "" || e.Reason != "" {
			size += 2*binary.MaxVarintLen32 + len(e.Field) + len(e.Reason)
		}
	}
	// One buffer for every append, kept: a fresh one per append was ~17 MB
	// of garbage per million entries, which the Go share of a small
	// memory budget pays for in collections.
	s.ledgerMu.Lock()
	defer s.ledgerMu.Unlock()
	b := slices.Grow(s.ledgerEnc[:0], size)[:wal.HeaderSize]
	b = binary.AppendUvarint(b, ledgerMarker)
	b = binary.AppendVarint(b, run.Project)
	b = appendStr(b, run.Import)
	b = appendStr(b, run.Run)
	b = binary.AppendVarint(b, run.AtMs)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i := range entries {
		e := &entries[i]
		b = append(b, e.Hash[:]...)
		if e.Field == "" && e.Reason == "" {
			b = append(b, byte(e.Outcome))
			continue
		}
		b = append(b, byte(e.Outcome)|ledgerDetail)
		b = appendStr(b, e.Field)
		b = appendStr(b, e.Reason)
	}
	s.ledgerEnc = b
	if cap(b) > 4<<20 { // an odd huge append must not pin its buffer
		s.ledgerEnc = nil
	}
	if _, err := s.wal.AppendFramed(b); err != nil {
		return err
	}
	s.applyMu.Lock()
	s.unapplied += int64(len(b))
	s.unappliedRows += int64(len(entries) / ledgerWeight)
	s.applyMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return nil
}

// decodeLedger reads a ledger entry after its marker; it returns the rows
// it counts for (ledgerWeight).
func decodeLedger(r *logReader, fn func(*logLedger) error) (rows int, err error) {
	var l logLedger
	l.project = r.varint()
	l.importID = r.bytes()
	l.run = r.bytes()
	l.atMs = r.varint()
	l.n = int(r.uvarint())
	l.rows = r.b
	if r.err != nil {
		return 0, r.err
	}
	if fn != nil {
		if err := fn(&l); err != nil {
			return 0, err
		}
	}
	return l.n / ledgerWeight, nil
}

// ledgerRunNo numbers a run in sync_ledger_runs: a hash of what names it,
// so the loader needs no lookup to number a run's entries.
func ledgerRunNo(project int64, importID, run []byte) int64 {
	h := xxh3.New()
	_, _ = h.WriteString(strconv.FormatInt(project, 10))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(importID)
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(run)
	return int64(h.Sum64())
}

var ledgerRowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "run_no", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "outcome", Type: arrow.PrimitiveTypes.Uint8},
}, nil)

const ledgerView = "tributary_load_ledger"

// ledgerChunk gathers the ledger entries of a loader transaction
// column-wise, like eventChunk; refusals, rare, go apart with their
// field and reason. The loader alone uses it.
type ledgerChunk struct {
	runNo, key []int64
	outcome    []uint8
	refused    []refusal
	runs       map[int64]store.LedgerRun // the runs of the entries
	// stored are runs inserted already (by transactions that committed:
	// a failed one forgets them all, fail), so a long run is inserted
	// once, not by every transaction (~10 ms each).
	stored map[int64]struct{}
	// prunes counts PruneLedger's commits (Store.ledgerPrunes); seen is
	// the count stored was filled under. A prune may delete a run row
	// stored holds while the run still loads entries: they would have no
	// run row, so a new count forgets stored and the row goes in again.
	prunes *atomic.Uint64
	seen   uint64
}

type refusal struct {
	runNo, key    int64
	field, reason string
}

// ledgerChunkEntries is how many entries the loader gathers before it
// inserts them (mid-transaction when need be): a row group, ~2 MB.
const ledgerChunkEntries = arrowChunkRows

func newLedgerChunk(prunes *atomic.Uint64) *ledgerChunk {
	return &ledgerChunk{runs: map[int64]store.LedgerRun{}, stored: map[int64]struct{}{}, prunes: prunes}
}

// fail drops what a failed transaction gathered, and what the chunk
// believed stored.
func (c *ledgerChunk) fail() {
	c.reset()
	clear(c.stored)
}

func (c *ledgerChunk) reset() {
	c.runNo, c.key, c.outcome = c.runNo[:0], c.key[:0], c.outcome[:0]
	clear(c.refused)
	c.refused = c.refused[:0]
	clear(c.runs)
}

func (c *ledgerChunk) full() bool { return len(c.key)+len(c.refused) >= ledgerChunkEntries }

// ledgerKey is the part of a key hash the embedded store keeps: 64 bits
// pick a key, a false match taking ~1e-10 odds with a billion entries of
// an import.
func ledgerKey(h []byte) int64 { return int64(binary.BigEndian.Uint64(h[:8])) }

// add appends a logged batch of entries.
func (c *ledgerChunk) add(l *logLedger) error {
	no := ledgerRunNo(l.project, l.importID, l.run)
	if _, ok := c.runs[no]; !ok {
		c.runs[no] = store.LedgerRun{Project: l.project, Import: string(l.importID), Run: string(l.run), AtMs: l.atMs}
	}
	r := logReader{b: l.rows}
	for range l.n {
		if len(r.b) < logEntryFixed {
			return errShortEntry
		}
		key, o := ledgerKey(r.b), r.b[16]
		r.b = r.b[logEntryFixed:]
		if o&ledgerDetail != 0 {
			field, reason := r.bytes(), r.bytes()
			if r.err != nil {
				return r.err
			}
			c.refused = append(c.refused, refusal{no, key, string(field), string(reason)})
			continue
		}
		c.runNo = append(c.runNo, no)
		c.key = append(c.key, key)
		c.outcome = append(c.outcome, o)
	}
	return nil
}

// An entry as logged: the hash, the outcome byte, then field and reason
// when the byte has ledgerDetail.
const logEntryFixed = 17

// insert adds the chunk's runs and entries inside the transaction open on
// conn, then resets the chunk (see eventChunk.insert).
func (c *ledgerChunk) insert(ctx context.Context, conn *duckdb.Conn, ar *duckarrow.Arrow) error {
	defer c.reset()
	if n := c.prunes.Load(); len(c.stored) > 4096 || n != c.seen {
		clear(c.stored) // a server's life of runs, or a prune: inserting again is harmless
		c.seen = n
	}
	for no, r := range c.runs {
		if _, ok := c.stored[no]; ok {
			continue
		}
		// Marked now: should the transaction fail, fail forgets it.
		c.stored[no] = struct{}{}
		if err := execArgs(ctx, conn, `INSERT INTO sync_ledger_runs VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			no, r.Project, r.Import, r.Run, r.AtMs); err != nil {
			return fmt.Errorf("insert ledger run: %w", err)
		}
	}
	if len(c.refused) > 0 {
		ap, err := duckdb.NewAppenderFromConn(conn, "", "sync_ledger_refused")
		if err != nil {
			return fmt.Errorf("ledger refusals appender: %w", err)
		}
		for _, f := range c.refused {
			if err = ap.AppendRow(f.runNo, f.key, f.field, f.reason); err != nil {
				break
			}
		}
		if cerr := ap.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("append ledger refusals: %w", err)
		}
	}
	if len(c.key) == 0 {
		return nil
	}
	rec := c.record()
	defer rec.Release()
	rdr, err := array.NewRecordReader(ledgerRowSchema, []arrow.RecordBatch{rec})
	if err != nil {
		return fmt.Errorf("arrow reader: %w", err)
	}
	defer rdr.Release()
	release, err := ar.RegisterView(rdr, ledgerView)
	if err != nil {
		return fmt.Errorf("register arrow view: %w", err)
	}
	defer release()
	if _, err := conn.ExecContext(ctx, `INSERT INTO sync_ledger_rows SELECT * FROM `+ledgerView, nil); err != nil {
		return fmt.Errorf("insert ledger entries: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `DROP VIEW IF EXISTS `+ledgerView, nil); err != nil {
		return fmt.Errorf("drop arrow view: %w", err)
	}
	return nil
}

// record wraps the columns, without copying, as a record batch valid
// until the next reset.
func (c *ledgerChunk) record() arrow.RecordBatch {
	n := len(c.key)
	i64 := func(v []int64) arrow.Array {
		d := array.NewData(arrow.PrimitiveTypes.Int64, n,
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))}, nil, 0, 0)
		defer d.Release()
		return array.NewInt64Data(d)
	}
	od := array.NewData(arrow.PrimitiveTypes.Uint8, n, []*memory.Buffer{nil, memory.NewBufferBytes(c.outcome)}, nil, 0, 0)
	oc := array.NewUint8Data(od)
	od.Release()
	cols := []arrow.Array{i64(c.runNo), i64(c.key), oc}
	rec := array.NewRecordBatch(ledgerRowSchema, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	return rec
}
