package run

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/store"
)

// mirrorLedger is a Mirror run's ledger: per key, inserted, updated or
// deleted, or refused (field, reason) when the changed row's record was.
// Entries of a change wait with it (staged) until its flush has written
// state and records, so a crash loses ledger lines, never records. All
// its methods are no-ops on nil (a store without a ledger, a plan, a
// table without a key), so the Mirror code calls them unguarded.
type mirrorLedger struct {
	l      *ledger
	h      *rowHasher         // a table without a key (the whole row is) has no key to record
	outc   []store.Outcome    // by row of the batch at hand (classify)
	fails  []mapping.RowError // refusals of the changed rows at hand, by index in changed
	staged []store.LedgerEntry
}

func newMirrorLedger(s Store, mr *mirrorRun) *mirrorLedger {
	if mr.plan != nil {
		return nil
	}
	l := newLedger(s, mr.im.ProjectID, mr.im.ID, mr.opt.RunID, mr.st.Started.UnixMilli())
	if l == nil {
		return nil
	}
	return &mirrorLedger{l: l, h: &mr.hasher}
}

// batch starts a batch of n rows.
func (ml *mirrorLedger) batch(n int) {
	if ml == nil {
		return
	}
	ml.outc = slices.Grow(ml.outc[:0], n)[:n]
	ml.fails = ml.fails[:0]
}

// chunk starts a slice of the batch's changed rows, which refusals
// (by index in changed) are numbered in.
func (ml *mirrorLedger) chunk() {
	if ml != nil {
		ml.fails = ml.fails[:0]
	}
}

// note records row i's outcome of the diff.
func (ml *mirrorLedger) note(i int, o store.Outcome) {
	if ml != nil {
		ml.outc[i] = o
	}
}

// refuse records the refusals of the changed rows being mapped (Row: the
// index in changed).
func (ml *mirrorLedger) refuse(fails []mapping.RowError) {
	if ml != nil {
		ml.fails = append(ml.fails, fails...)
	}
}

// stage records changed row i (the k-th changed row) under its key.
func (ml *mirrorLedger) stage(key []byte, i, k int) {
	if ml == nil || len(ml.h.key) == 0 {
		return
	}
	e := store.LedgerEntry{Hash: store.LedgerKeyHash(mirrorKeyText(key)), Outcome: ml.outc[i]}
	for _, f := range ml.fails {
		if f.Row == int64(k) {
			e.Outcome, e.Field, e.Reason = store.OutcomeRefused, f.Field, f.Message
			if e.Field == "" {
				e.Field = f.Column
			}
			break
		}
	}
	ml.staged = append(ml.staged, e)
}

// deleted records a key removed.
func (ml *mirrorLedger) deleted(key []byte) {
	if ml != nil && len(ml.h.key) > 0 {
		ml.staged = append(ml.staged, store.LedgerEntry{Hash: store.LedgerKeyHash(mirrorKeyText(key)), Outcome: store.OutcomeDeleted})
	}
}

// done hands the staged entries to the ledger once their change is
// written.
func (ml *mirrorLedger) done(ctx context.Context) error {
	if ml == nil {
		return nil
	}
	ml.l.entries = append(ml.l.entries, ml.staged...)
	clear(ml.staged)
	ml.staged = ml.staged[:0]
	return ml.l.flush(ctx, false)
}

// close appends what is left at the end of a pass (entries of changes
// that were not written stay out).
func (ml *mirrorLedger) close(ctx context.Context) error {
	if ml == nil {
		return nil
	}
	return ml.l.flush(ctx, true)
}

// mirrorKeyText turns an encoded Mirror key (rowHasher.keyOf) into the
// ledger's text of a key, as rowKeys writes it for other runs: integers
// in decimal, text as it is, the columns of a composite key joined by a
// tab; other types in a readable form.
func mirrorKeyText(enc []byte) string {
	var out []byte
	for first := true; len(enc) > 0; first = false {
		if !first {
			out = append(out, keySep)
		}
		tag := enc[0]
		enc = enc[1:]
		fixed := func() (int64, bool) {
			if len(enc) < 8 {
				return 0, false
			}
			v := int64(binary.BigEndian.Uint64(enc))
			enc = enc[8:]
			return v, true
		}
		switch tag {
		case 0: // NULL
		case 'T', 'F':
			out = strconv.AppendBool(out, tag == 'T')
		case 's', 'b', 'v':
			n, w := binary.Uvarint(enc)
			if w <= 0 || uint64(len(enc)-w) < n {
				return string(out)
			}
			out = append(out, enc[w:w+int(n)]...)
			enc = enc[w+int(n):]
		default:
			v, ok := fixed()
			if !ok {
				return string(out)
			}
			switch {
			case tag == 'i':
				out = strconv.AppendInt(out, v, 10)
			case tag == 'u':
				out = strconv.AppendUint(out, uint64(v), 10)
			case tag == 'f':
				out = strconv.AppendFloat(out, math.Float64frombits(uint64(v)), 'g', -1, 64)
			case tag == 'd':
				out = time.Unix(v, 0).UTC().AppendFormat(out, time.DateOnly)
			case tag >= '0' && tag <= '3':
				t := arrow.Timestamp(v).ToTime(arrow.TimeUnit(tag - '0'))
				out = t.UTC().AppendFormat(out, time.RFC3339Nano)
			}
		}
	}
	return string(out)
}
