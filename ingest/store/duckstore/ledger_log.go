package duckstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

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
	b := make([]byte, wal.HeaderSize, size)
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

// ledgerBuckets splits a run's entries by the first byte of their key
// hash: a lookup reads one bucket's pages.
const ledgerBuckets = 256

// maxLedgerPage bounds a page's bytes (but a page holds one entry at
// least).
const maxLedgerPage = 4000

var ledgerPageSchema = arrow.NewSchema([]arrow.Field{
	{Name: "run_no", Type: arrow.PrimitiveTypes.Int64},
	{Name: "bucket", Type: arrow.PrimitiveTypes.Uint8},
	{Name: "n", Type: arrow.PrimitiveTypes.Int32},
	{Name: "entries", Type: arrow.BinaryTypes.Binary},
}, nil)

const ledgerView = "tributary_load_ledger"

// runPages are one run's entries of a loader transaction, by bucket, each
// bucket's entries as logged (hash, outcome byte, field and reason).
type runPages struct {
	run     store.LedgerRun
	buckets [ledgerBuckets][]byte
	n       [ledgerBuckets]int32
}

// ledgerChunk gathers the ledger entries of a loader transaction as
// pages, one per run and bucket. The loader alone uses it.
type ledgerChunk struct {
	runs    map[int64]*runPages
	spare   []*runPages // emptied, for reuse: their buckets keep their room
	entries int
}

// ledgerChunkEntries is how many entries the loader gathers before it
// stores them as pages (mid-transaction when need be): about half a
// megabyte of buckets.
const ledgerChunkEntries = 32 << 10

func newLedgerChunk() *ledgerChunk { return &ledgerChunk{runs: map[int64]*runPages{}} }

func (c *ledgerChunk) reset() {
	for _, rp := range c.runs {
		for k := range rp.buckets {
			rp.buckets[k] = rp.buckets[k][:0]
		}
		rp.n = [ledgerBuckets]int32{}
		c.spare = append(c.spare, rp)
	}
	// A transaction that saw many runs (many small imports) does not keep
	// all their buckets.
	c.spare = c.spare[:min(len(c.spare), 2)]
	clear(c.runs)
	c.entries = 0
}

func (c *ledgerChunk) full() bool { return c.entries >= ledgerChunkEntries }

// add files a logged batch of entries into its run's buckets.
func (c *ledgerChunk) add(l *logLedger) error {
	no := ledgerRunNo(l.project, l.importID, l.run)
	rp := c.runs[no]
	if rp == nil {
		if k := len(c.spare); k > 0 {
			rp, c.spare = c.spare[k-1], c.spare[:k-1]
		} else {
			rp = new(runPages)
		}
		rp.run = store.LedgerRun{Project: l.project, Import: string(l.importID), Run: string(l.run), AtMs: l.atMs}
		c.runs[no] = rp
	}
	b := l.rows
	for range l.n {
		size, err := ledgerEntrySize(b, logEntryFixed)
		if err != nil {
			return err
		}
		k := b[0]
		page := append(rp.buckets[k], b[1:pageHashBytes+1]...)
		rp.buckets[k] = append(page, b[16:size]...) // outcome, details
		rp.n[k]++
		b = b[size:]
	}
	c.entries += l.n
	return nil
}

// An entry as logged has the whole hash; in a page, the 7 bytes after
// the first (the bucket's): 64 bits of the hash pick a key, a false match
// taking ~1e-10 odds with a billion entries of an import.
const (
	logEntryFixed  = 17 // hash, outcome
	pageHashBytes  = 7
	pageEntryFixed = pageHashBytes + 1
)

// ledgerEntrySize is the size of the entry b starts with, whose fixed
// part (hash, outcome) is fixed bytes.
func ledgerEntrySize(b []byte, fixed int) (int, error) {
	if len(b) < fixed {
		return 0, errShortEntry
	}
	if b[fixed-1]&ledgerDetail == 0 {
		return fixed, nil
	}
	r := logReader{b: b[fixed:]}
	r.bytes()
	r.bytes()
	if r.err != nil {
		return 0, r.err
	}
	return len(b) - len(r.b), nil
}

// insert adds the chunk's runs and pages inside the transaction open on
// conn, then resets the chunk.
func (c *ledgerChunk) insert(ctx context.Context, conn *duckdb.Conn, ar *duckarrow.Arrow) error {
	defer c.reset()
	if len(c.runs) == 0 {
		return nil
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, ledgerPageSchema)
	defer b.Release()
	runNo := b.Field(0).(*array.Int64Builder)
	bucket := b.Field(1).(*array.Uint8Builder)
	n := b.Field(2).(*array.Int32Builder)
	entries := b.Field(3).(*array.BinaryBuilder)
	for no, rp := range c.runs {
		if err := execArgs(ctx, conn, `INSERT INTO sync_ledger_runs VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			no, rp.run.Project, rp.run.Import, rp.run.Run, rp.run.AtMs); err != nil {
			return fmt.Errorf("insert ledger run: %w", err)
		}
		for k := range rp.buckets {
			// Pages stay under DuckDB's inline string limit (4 KB): a
			// larger value goes to an overflow block of its own.
			for page := rp.buckets[k]; len(page) > 0; {
				cut, count := 0, int32(0)
				for cut < len(page) {
					size, err := ledgerEntrySize(page[cut:], pageEntryFixed)
					if err != nil {
						return err
					}
					if cut > 0 && cut+size > maxLedgerPage {
						break
					}
					cut += size
					count++
				}
				runNo.Append(no)
				bucket.Append(uint8(k))
				n.Append(count)
				entries.Append(page[:cut])
				page = page[cut:]
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	rdr, err := array.NewRecordReader(ledgerPageSchema, []arrow.RecordBatch{rec})
	if err != nil {
		return fmt.Errorf("arrow reader: %w", err)
	}
	defer rdr.Release()
	release, err := ar.RegisterView(rdr, ledgerView)
	if err != nil {
		return fmt.Errorf("register arrow view: %w", err)
	}
	defer release()
	if _, err := conn.ExecContext(ctx, `INSERT INTO sync_ledger_pages SELECT * FROM `+ledgerView, nil); err != nil {
		return fmt.Errorf("insert ledger pages: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `DROP VIEW IF EXISTS `+ledgerView, nil); err != nil {
		return fmt.Errorf("drop arrow view: %w", err)
	}
	return nil
}

// findInPage appends to out the entries of a page whose hash is h.
func findInPage(page []byte, h *[16]byte, line store.LedgerLine, out []store.LedgerLine) ([]store.LedgerLine, error) {
	for len(page) > 0 {
		size, err := ledgerEntrySize(page, pageEntryFixed)
		if err != nil {
			return out, err
		}
		if string(page[:pageHashBytes]) == string(h[1:pageHashBytes+1]) {
			o := page[pageEntryFixed-1]
			line.Outcome = store.Outcome(o &^ ledgerDetail)
			line.Field, line.Reason = "", ""
			if o&ledgerDetail != 0 {
				r := logReader{b: page[pageEntryFixed:size]}
				line.Field, line.Reason = string(r.bytes()), string(r.bytes())
			}
			out = append(out, line)
		}
		page = page[size:]
	}
	return out, nil
}
