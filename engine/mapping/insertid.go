package mapping

import (
	"encoding/binary"
	"math/bits"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/zeebo/xxh3"
)

// uuidText formats a 128-bit hash as 36 bytes of [0-9a-f-] (UUID layout),
// the longest $insert_id the import API accepts.
func uuidText(h xxh3.Uint128) [36]byte {
	var out [36]byte
	hi, lo := hex8(uint32(h.Hi)), hex8(uint32(h.Lo>>32))
	binary.LittleEndian.PutUint64(out[0:], hex8(uint32(h.Hi>>32)))
	out[8] = '-'
	binary.LittleEndian.PutUint32(out[9:], uint32(hi))
	out[13] = '-'
	binary.LittleEndian.PutUint32(out[14:], uint32(hi>>32))
	out[18] = '-'
	binary.LittleEndian.PutUint32(out[19:], uint32(lo))
	out[23] = '-'
	binary.LittleEndian.PutUint32(out[24:], uint32(lo>>32))
	binary.LittleEndian.PutUint64(out[28:], hex8(uint32(h.Lo)))
	return out
}

// hex8 returns the eight lower-case hex digits of x, most significant
// first when stored little-endian.
func hex8(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	v = (v | v<<8) & 0x00ff00ff00ff00ff
	v = (v | v<<4) & 0x0f0f0f0f0f0f0f0f // one nibble per byte, least significant first
	v = bits.ReverseBytes64(v)
	letters := ((v + 0x0606060606060606) >> 4) & 0x0101010101010101 // nibbles of 10 and more
	return v + 0x3030303030303030 + letters*('a'-'0'-10)
}

// NormalizeInsertID keeps a valid id and maps any other (a 40-hex SHA1, a
// UUID with braces, non-ASCII) deterministically to 36 valid bytes.
func NormalizeInsertID(s string) string {
	if record.ValidInsertID(s) {
		return s
	}
	id := uuidText(xxh3.HashString128(s))
	return string(id[:])
}

// AppendNormalizedInsertID appends NormalizeInsertID(s) to dst, for
// callers that derive an id per event and must not allocate one.
func AppendNormalizedInsertID(dst []byte, s string) []byte {
	if record.ValidInsertID(s) {
		return append(dst, s...)
	}
	id := uuidText(xxh3.HashString128(s))
	return append(dst, id[:]...)
}

// derivedID is the $insert_id of a row without an insert-id column value:
// a hash of the event name, the distinct id and the time (all in header)
// and the row's identity, spec §2.5: its primary key, or when it has none
// every column (props, the written properties, plus the columns that are
// not properties). Run-specific tags are not hashed, so a re-read row
// always gets the same id and dedup absorbs it.
func (m *Mapper) derivedID(header, props []byte, i int) [36]byte {
	// One contiguous buffer hashed at once is what the streaming hasher
	// computed from its pieces, minus its bookkeeping.
	b := m.hashBuf[:0]
	if !m.opt.KeyID || len(m.pkCols) == 0 {
		b = append(b, header...)
	}
	if len(m.pkCols) > 0 {
		for _, c := range m.pkCols {
			b = append(b, 0x1f)
			b = m.roots[c].appendHashable(b, i)
		}
	} else {
		b = append(b, props...)
		for k, c := range m.extraCols {
			b = append(b, m.extraTags[k]...) // names, not positions: a new column must not change ids
			if v := &m.roots[c]; v.offs != nil && v.valid == nil {
				b = append(b, v.data[v.offs[i]:v.offs[i+1]]...) // a plain string column, inline
			} else {
				b = v.appendHashable(b, i)
			}
		}
	}
	m.hashBuf = b
	return uuidText(xxh3.Hash128(b))
}

// appendHashable appends row i's value for hashing: the raw bytes of text
// (no escaping or JSON validation), the value otherwise; NULL is a marker
// byte no value starts with.
func (v *venc) appendHashable(dst []byte, i int) []byte {
	if v.isNull(i) {
		return append(dst, 0x00)
	}
	switch v.kind {
	case kString:
		return append(dst, v.str(i)...)
	case kBinary:
		return append(dst, v.bin(i)...)
	case kInt, kTimestamp, kDate32, kDate64:
		return binary.LittleEndian.AppendUint64(dst, uint64(v.ints(i)))
	}
	return v.appendValue(dst, i)
}
