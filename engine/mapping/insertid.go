package mapping

import (
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/zeebo/xxh3"
)

const hexDigits = "0123456789abcdef"

// uuidText formats a 128-bit hash as 36 bytes of [0-9a-f-] (UUID layout),
// the longest $insert_id the import API accepts.
func uuidText(h xxh3.Uint128) [36]byte {
	var b [16]byte
	for k := 0; k < 8; k++ {
		b[k] = byte(h.Hi >> (56 - 8*k))
		b[8+k] = byte(h.Lo >> (56 - 8*k))
	}
	var out [36]byte
	j := 0
	for k, c := range b {
		if k == 4 || k == 6 || k == 8 || k == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hexDigits[c>>4], hexDigits[c&15]
		j += 2
	}
	return out
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

// derivedID is the $insert_id of a row without an insert-id column value:
// a hash of the event name, the distinct id and the time (all in header)
// and the row's identity, spec §2.5: its primary key, or when it has none
// every column (props, the written properties, plus the columns that are
// not properties). Run-specific tags are not hashed, so a re-read row
// always gets the same id and dedup absorbs it.
func (m *Mapper) derivedID(header, props []byte, i int) [36]byte {
	h := m.hasher
	h.Reset()
	h.Write(header)
	m.hashBuf = m.hashBuf[:0]
	if len(m.pkCols) > 0 {
		for _, c := range m.pkCols {
			m.hashBuf = append(m.hashBuf, 0x1f)
			m.hashBuf = m.roots[c].appendHashable(m.hashBuf, i)
		}
	} else {
		h.Write(props)
		for _, c := range m.extraCols {
			m.hashBuf = append(m.hashBuf, 0x1f)
			m.hashBuf = append(m.hashBuf, m.plans[c].Column...) // names, not positions: a new column must not change ids
			m.hashBuf = m.roots[c].appendHashable(m.hashBuf, i)
		}
	}
	h.Write(m.hashBuf)
	return uuidText(h.Sum128())
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
		x := uint64(v.ints(i))
		return append(dst, byte(x), byte(x>>8), byte(x>>16), byte(x>>24), byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56))
	}
	return v.appendValue(dst, i)
}
