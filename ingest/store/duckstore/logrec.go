package duckstore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A log entry holds the rows of one Write exactly as they will be appended
// (duplicates already removed, seq already assigned), so that replaying an
// entry is deterministic and needs no dedup decision.
//
// Layout (varints unless noted): nEvents, then per event: project, name,
// distinct_id, time_ms, insert_id ("" = none), props, ingest_ms, seq,
// [16-byte key when insert_id != ""]; nMerges, then per merge: project,
// id1, id2, time_ms, ingest_ms, props, seq. Strings are length-prefixed.
// Entries written since identity and profiles landed go on (older ones end
// here): nChanges, then per change: project, kind, a, b, seq; nProfiles,
// then per profile state: project, kind, group_key, id, deleted (0|1),
// props, updated_ms. Entries with sync checkpoints go on (older ones end
// here): nCheckpoints, then per checkpoint: project, import id, value.
// Entries with usage counts go on (older ones end here): nUsage, then per
// counter: project, month, source, events. Entries since daily usage go
// on (older ones end here; older builds ignore it): nDays, then per
// counter: project, day, source, events.
//
// An entry whose events carry common properties (store.Batch.Common)
// starts with commonMarker, nCommon and each common object; the layout
// above follows, with one more field per event after its key: the index
// of its common object, from 1 (0 = none). Entries without any keep the
// layout above exactly, so older builds' entries read the same.

// commonMarker cannot be an event count: an entry holds at most
// wal.MaxEntry bytes.
const commonMarker = 1 << 40

type logEvent struct {
	project, timeMs, ingestMs, seq int64
	name, distinctID, insertID     []byte
	props                          []byte
	hi, lo                         int64
	common                         []byte // nil: none
}

type logChange struct {
	project, seq int64
	kind         uint8
	a, b         []byte
}

type logUsage struct {
	project, events int64
	month, source   []byte
}

type logCheckpoint struct {
	project       int64
	importID, val []byte
}

type logProfile struct {
	project, updatedMs int64
	kind               uint8
	groupKey, id       []byte
	deleted            bool
	props              []byte
}

// entryVisitor receives the rows of an entry; nil funcs skip their kind.
type entryVisitor struct {
	event      func(*logEvent) error
	merge      func(*logMerge) error
	change     func(*logChange) error
	profile    func(*logProfile) error
	checkpoint func(*logCheckpoint) error
	usage      func(*logUsage) error
	day        func(*logUsage) error  // month holds the day (YYYY-MM-DD)
	ledger     func(*logLedger) error // an entry of ledger lines (ledger_log.go)
}

type logMerge struct {
	project, timeMs, ingestMs, seq int64
	id1, id2, props                []byte
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errShortEntry = errors.New("duckstore: truncated log entry")

// logReader decodes an entry; its slices alias the entry's bytes.
type logReader struct {
	b   []byte
	err error
}

func (r *logReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortEntry
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *logReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShortEntry
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *logReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.err = errShortEntry
		return nil
	}
	s := r.b[:n:n]
	r.b = r.b[n:]
	return s
}

func (r *logReader) byte() uint8 {
	if r.err != nil || len(r.b) < 1 {
		r.err = errShortEntry
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *logReader) fixed64() int64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errShortEntry
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	return v
}

// encodeEntry writes the planned rows of s.scratch.
func (s *Store) encodeEntry(dst []byte, seq int64) []byte {
	sc := &s.scratch
	rows := sc.rows
	if len(sc.common) > 0 {
		dst = binary.AppendUvarint(dst, commonMarker)
		dst = binary.AppendUvarint(dst, uint64(len(sc.common)))
		for _, sh := range sc.common {
			dst = appendBytes(dst, sh)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(rows)))
	for i := range rows {
		r := &rows[i]
		dst = binary.AppendVarint(dst, r.project)
		dst = appendStr(dst, r.e.Name)
		dst = appendStr(dst, r.e.DistinctID)
		dst = binary.AppendVarint(dst, r.e.TimeMs)
		if r.dedup {
			dst = appendStr(dst, r.e.InsertID)
		} else {
			dst = appendStr(dst, "")
		}
		dst = appendBytes(dst, r.e.Props)
		dst = binary.AppendVarint(dst, r.e.IngestMs)
		dst = binary.AppendVarint(dst, seq+int64(i))
		if r.dedup {
			dst = append(dst, r.key[:]...)
		}
		if len(sc.common) > 0 {
			dst = binary.AppendUvarint(dst, uint64(r.common))
		}
	}
	seq += int64(len(rows))
	dst = binary.AppendUvarint(dst, uint64(len(sc.merges)))
	for i, m := range sc.merges {
		dst = binary.AppendVarint(dst, m.project)
		dst = appendStr(dst, m.m.DistinctIDs[0])
		dst = appendStr(dst, m.m.DistinctIDs[1])
		dst = binary.AppendVarint(dst, m.m.TimeMs)
		dst = binary.AppendVarint(dst, m.m.IngestMs)
		dst = appendBytes(dst, m.m.Props)
		dst = binary.AppendVarint(dst, seq+int64(i))
	}
	seq += int64(len(sc.merges))
	use := s.usage.planned()
	if len(sc.changes) == 0 && len(sc.profiles) == 0 && len(sc.checkpoints) == 0 && len(use) == 0 {
		return dst // the old layout, which every build reads
	}
	dst = binary.AppendUvarint(dst, uint64(len(sc.changes)))
	for i, c := range sc.changes {
		dst = binary.AppendVarint(dst, c.project)
		dst = append(dst, byte(c.c.Kind))
		dst = appendStr(dst, c.c.A)
		dst = appendStr(dst, c.c.B)
		dst = binary.AppendVarint(dst, seq+int64(i))
	}
	dst = binary.AppendUvarint(dst, uint64(len(sc.profiles)))
	for _, p := range sc.profiles {
		dst = binary.AppendVarint(dst, p.key.project)
		dst = append(dst, byte(p.key.kind))
		dst = appendStr(dst, p.key.groupKey)
		dst = appendStr(dst, p.key.id)
		if p.state.deleted {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
		dst = appendBytes(dst, p.state.props)
		dst = binary.AppendVarint(dst, p.state.updatedMs)
	}
	if len(sc.checkpoints) == 0 && len(use) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(sc.checkpoints)))
	for _, c := range sc.checkpoints {
		dst = binary.AppendVarint(dst, c.project)
		dst = appendStr(dst, c.importID)
		dst = appendBytes(dst, c.val)
	}
	if len(use) == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(len(use)))
	for _, u := range use {
		dst = binary.AppendVarint(dst, u.Project)
		dst = appendStr(dst, u.Month)
		dst = appendStr(dst, u.Source)
		dst = binary.AppendVarint(dst, u.Events)
	}
	days := s.usage.loggedDays
	dst = binary.AppendUvarint(dst, uint64(len(days)))
	for _, d := range days {
		dst = binary.AppendVarint(dst, d.Project)
		dst = appendStr(dst, d.Day)
		dst = appendStr(dst, d.Source)
		dst = binary.AppendVarint(dst, d.Events)
	}
	return dst
}

// decodeEntry calls v's funcs for each row of an entry, in order.
func decodeEntry(b []byte, v entryVisitor) (rows int, err error) {
	r := logReader{b: b}
	var e logEvent
	n := r.uvarint()
	if n == ledgerMarker {
		return decodeLedger(&r, v.ledger)
	}
	var common [][]byte
	hasCommon := n == commonMarker
	if hasCommon {
		for k := r.uvarint(); k > 0 && r.err == nil; k-- {
			common = append(common, r.bytes())
		}
		n = r.uvarint()
	}
	for ; n > 0 && r.err == nil; n-- {
		e.project = r.varint()
		e.name = r.bytes()
		e.distinctID = r.bytes()
		e.timeMs = r.varint()
		e.insertID = r.bytes()
		e.props = r.bytes()
		e.ingestMs = r.varint()
		e.seq = r.varint()
		e.hi, e.lo = 0, 0
		if len(e.insertID) > 0 {
			e.hi, e.lo = r.fixed64(), r.fixed64()
		}
		e.common = nil
		if hasCommon {
			switch i := r.uvarint(); {
			case i > uint64(len(common)):
				return rows, fmt.Errorf("duckstore: log entry: event %d names common properties %d of %d", rows, i, len(common))
			case i > 0:
				e.common = common[i-1]
			}
		}
		if r.err != nil {
			break
		}
		if v.event != nil {
			if err := v.event(&e); err != nil {
				return rows, err
			}
		}
		rows++
	}
	var m logMerge
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		m.project = r.varint()
		m.id1 = r.bytes()
		m.id2 = r.bytes()
		m.timeMs = r.varint()
		m.ingestMs = r.varint()
		m.props = r.bytes()
		m.seq = r.varint()
		if r.err != nil {
			break
		}
		if v.merge != nil {
			if err := v.merge(&m); err != nil {
				return rows, err
			}
		}
		rows++
	}
	if r.err != nil || len(r.b) == 0 {
		return rows, r.err
	}
	var c logChange
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		c.project = r.varint()
		c.kind = r.byte()
		c.a = r.bytes()
		c.b = r.bytes()
		c.seq = r.varint()
		if r.err != nil {
			break
		}
		if v.change != nil {
			if err := v.change(&c); err != nil {
				return rows, err
			}
		}
		rows++
	}
	var p logProfile
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		p.project = r.varint()
		p.kind = r.byte()
		p.groupKey = r.bytes()
		p.id = r.bytes()
		p.deleted = r.byte() == 1
		p.props = r.bytes()
		p.updatedMs = r.varint()
		if r.err != nil {
			break
		}
		if v.profile != nil {
			if err := v.profile(&p); err != nil {
				return rows, err
			}
		}
		rows++
	}
	if r.err != nil || len(r.b) == 0 {
		return rows, r.err
	}
	var c2 logCheckpoint
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		c2.project = r.varint()
		c2.importID = r.bytes()
		c2.val = r.bytes()
		if r.err != nil {
			break
		}
		if v.checkpoint != nil {
			if err := v.checkpoint(&c2); err != nil {
				return rows, err
			}
		}
	}
	if r.err != nil || len(r.b) == 0 {
		return rows, r.err
	}
	if err := r.usageSection(v.usage); err != nil || len(r.b) == 0 {
		return rows, err
	}
	return rows, r.usageSection(v.day)
}

// usageSection reads one section of usage counts, the months' or (in a
// section of its own, so older builds stop before it) the days', and
// hands each to fn when it is set.
func (r *logReader) usageSection(fn func(*logUsage) error) error {
	var u logUsage
	for n := r.uvarint(); n > 0 && r.err == nil; n-- {
		u.project = r.varint()
		u.month = r.bytes()
		u.source = r.bytes()
		u.events = r.varint()
		if r.err != nil {
			break
		}
		if fn != nil {
			if err := fn(&u); err != nil {
				return err
			}
		}
	}
	return r.err
}
