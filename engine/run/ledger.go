package run

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/store"
)

// LedgerStore is what a run needs to keep its row-level ledger; a store
// without it (a test double) runs without one.
type LedgerStore interface {
	AddLedger(ctx context.Context, run store.LedgerRun, entries []store.LedgerEntry, quarantine []store.QuarantineRow) error
}

// ledgerFlush is how many entries a run gathers before appending them:
// one store append (a log entry, a COPY) per this many rows keeps the
// ledger's cost a small share of the write's, and its two buffers under
// a megabyte each.
const ledgerFlush = 16 << 10

// ledger gathers one run's row outcomes, keyed by each row's primary key,
// else its $insert_id (events), profile id or lookup key. Entries are written after the batch they describe, so a
// crash between loses ledger lines, never records; they are appended on
// a goroutine of their own, one buffer filling while the other is
// written, so the sync's writes do not wait for them. Only the
// pipeline's writer stage touches it.
type ledger struct {
	st  LedgerStore
	run store.LedgerRun
	ledgerBuf
	spare    ledgerBuf
	inflight chan flushed // the append in flight; nil: none
	dups     []int32
	// again, when not nil, gathers the hashes of rows refused (a replay:
	// those stay in the quarantine).
	again [][16]byte
	// held are a lookup table's entries, appended once the table is
	// stored (ledger_profiles.go).
	held []store.LedgerEntry
}

// ledgerBuf is what one append writes; the store has copied it when
// AddLedger returns, and the buffer is reused.
type ledgerBuf struct {
	entries []store.LedgerEntry
	quar    []store.QuarantineRow
}

type flushed struct {
	buf ledgerBuf
	err error
}

func newLedger(s Store, project int64, importID, runID string, atMs int64) *ledger {
	ls, ok := s.(LedgerStore)
	if !ok || runID == "" {
		return nil
	}
	return &ledger{st: ls, run: store.LedgerRun{Project: project, Import: importID, Run: runID, AtMs: atMs}}
}

// events records a written batch's events: imported, or duplicate when
// the store named them in DupEvents.
func (l *ledger) events(batch *store.Batch, res store.WriteResult, keys *rowKeys, rows []int32) {
	byKey := keys.cols != nil && len(rows) == len(batch.Events)
	var dup []int32
	if len(res.Batches) == 1 {
		dup = res.Batches[0].DupEvents
	}
	if len(dup) > 1 && !slices.IsSorted(dup) {
		l.dups = append(l.dups[:0], dup...)
		slices.Sort(l.dups)
		dup = l.dups
	}
	l.entries = slices.Grow(l.entries, len(batch.Events))
	for i := range batch.Events {
		e := &batch.Events[i]
		o := store.OutcomeImported
		if len(dup) > 0 && dup[0] == int32(i) {
			o, dup = store.OutcomeDuplicate, dup[1:]
		}
		key := e.InsertID
		if byKey {
			key = unsafeString(keys.key(int(rows[i])))
		}
		if key == "" {
			continue
		}
		l.entries = append(l.entries, store.LedgerEntry{Hash: store.LedgerKeyHash(key), Outcome: o})
	}
}

// refused records refused rows and their quarantine copies.
func (l *ledger) refused(fails []mapping.RowError, first int64, keys *rowKeys, quar []store.QuarantineRow) {
	for _, f := range fails {
		key := refusedKey(f, first, keys)
		field := f.Field
		if field == "" {
			field = f.Column
		}
		h := store.LedgerKeyHash(key)
		l.entries = append(l.entries, store.LedgerEntry{Hash: h, Outcome: store.OutcomeRefused, Field: field, Reason: f.Message})
		if l.again != nil {
			l.again = append(l.again, h)
		}
	}
	l.quar = append(l.quar, quar...)
}

// flush appends what was gathered when it is worth a transaction, or
// whatever there is when force is set (the end of a pass).
func (l *ledger) flush(ctx context.Context, force bool) error {
	if l == nil || (!force && len(l.entries) < ledgerFlush) {
		return nil
	}
	if err := l.wait(); err != nil {
		return err
	}
	if len(l.entries) > 0 || len(l.quar) > 0 {
		buf := l.ledgerBuf
		l.ledgerBuf, l.spare = l.spare, ledgerBuf{}
		done := make(chan flushed, 1)
		l.inflight = done
		go func() {
			err := l.st.AddLedger(context.WithoutCancel(ctx), l.run, buf.entries, buf.quar)
			done <- flushed{buf, err}
		}()
	}
	if force {
		return l.wait()
	}
	return nil
}

// wait waits for the append in flight and takes its buffer back.
func (l *ledger) wait() error {
	if l.inflight == nil {
		return nil
	}
	f := <-l.inflight
	l.inflight = nil
	clear(f.buf.entries)
	clear(f.buf.quar)
	l.spare = ledgerBuf{entries: f.buf.entries[:0], quar: f.buf.quar[:0]}
	if f.err != nil {
		return fmt.Errorf("ledger: %w", f.err)
	}
	return nil
}

// refusedKey is a refused row's ledger key: its primary key, else its
// $insert_id, or for a row
// refused before it had one, its row number in the run.
func refusedKey(f mapping.RowError, first int64, keys *rowKeys) string {
	if i := f.Row - first; keys.cols != nil && i >= 0 && int(i) < len(keys.ends) {
		return string(keys.key(int(i)))
	}
	if f.Key != "" {
		return f.Key
	}
	return fmt.Sprintf("row:%d", f.Row)
}

// quarantine copies the refused rows of rec (the batch whose first row is
// row base of the run) as one-row Arrow IPC streams, so a replay maps them
// with the types they were read with. Refused rows are rare: the
// encoding's cost is theirs alone.
func quarantine(rec arrow.RecordBatch, base int64, fails []mapping.RowError, keys *rowKeys, run string, atMs int64) []store.QuarantineRow {
	out := make([]store.QuarantineRow, 0, len(fails))
	for _, f := range fails {
		i := f.Row - base
		if i < 0 || i >= rec.NumRows() {
			continue
		}
		row, err := encodeRow(rec, i)
		if err != nil {
			continue // the ledger still says why it was refused
		}
		key := refusedKey(f, base, keys)
		field := f.Field
		if field == "" {
			field = f.Column
		}
		out = append(out, store.QuarantineRow{Hash: store.LedgerKeyHash(key), Key: store.TruncKey(key), Run: run, AtMs: atMs,
			Field: field, Reason: f.Message, Row: row})
	}
	return out
}

func encodeRow(rec arrow.RecordBatch, i int64) ([]byte, error) {
	one := rec.NewSlice(i, i+1)
	defer one.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(one.Schema()))
	if err := w.Write(one); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeRow reads a quarantined row back (see quarantine).
func DecodeRow(b []byte) (arrow.RecordBatch, error) {
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("quarantined row: no record")
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// unsafeString views b as a string for hashing and cloning, without a
// copy per row; the string must not outlive b's next reuse.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
