package mapping

import (
	"unsafe"

	"github.com/valyala/fastjson"
	"github.com/zeebo/xxh3"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// appendDynamic writes the properties of a MAP or JSON value whose keys are
// only known per row: nested objects become dotted names, and a name a
// table column already wrote, or one written earlier in this row, is
// skipped (the table column wins, spec'd by the public connector docs).
func (m *Mapper) appendDynamic(dst []byte, v *venc, i int, prefix string) []byte {
	if v.kind == kMap {
		s, e := v.listBounds(i)
		for j := s; j < e; j++ {
			if v.key.isNull(j) || v.elem.isNull(j) {
				continue
			}
			mark := len(m.scratch)
			m.scratch = append(m.scratch, prefix...)
			m.scratch = append(m.scratch, '.')
			m.scratch = v.key.appendText(m.scratch, j)
			name := m.scratch[mark:]
			if m.claim(name) {
				dst = m.keyBytes(dst, name, false)
				n := len(dst)
				dst = v.elem.appendValue(dst, j)
				m.clean = m.clean && record.CleanValue(dst[n:])
			}
			m.scratch = m.scratch[:mark]
		}
		return dst
	}
	var text string
	switch v.kind {
	case kString:
		text = v.str(i)
	case kBinary:
		text = b2s(v.bin(i))
	case kStruct:
		return dst // a STRUCT JSON-properties column: its fields are leaves already
	default:
		return dst
	}
	return m.appendJSONText(dst, text, prefix)
}

// appendJSONText flattens a JSON document held in a text column. A JSON
// property column that does not hold an object keeps the text as a string;
// the JSON-properties column must hold objects (the row is refused).
func (m *Mapper) appendJSONText(dst []byte, text, prefix string) []byte {
	if out, ok := m.flattenJSON(dst, text, prefix); ok {
		return out
	}
	if prefix == "" {
		m.badJSON = true
		return dst
	}
	// prefix is the column's own name: plan counted it among the fixed
	// names, so that no name read from a row takes it, and a claim would
	// always fail. A table column of that name still wins.
	if _, static := m.static[prefix]; static {
		return dst
	}
	if name := []byte(prefix); m.claimDynamic(name, false) {
		dst = m.keyBytes(dst, name, false)
		n := len(dst)
		dst = appendString(dst, text)
		m.vouchText(text, len(dst)-n)
	}
	return dst
}

// claim reports whether name is free in this row, and takes it. Names of
// table columns and of the mapper's own fields are blocked for good (a
// Bloom filter spares most names the map lookup); a row repeats a dynamic
// name rarely, so those are checked linearly, by tag first, until there
// are many, then through a hash set.
func (m *Mapper) claim(name []byte) bool { return m.claimName(name, false) }

// claimName is claim; stable says that name's bytes stay put for the
// whole row (text of the batch, not scratch), so they need no copy.
func (m *Mapper) claimName(name []byte, stable bool) bool {
	t := nameTag(name)
	if m.fixedBloom.has(t) {
		if _, taken := m.names[b2s(name)]; taken {
			return false
		}
	}
	return m.claimTagged(name, t, stable)
}

// claimDynamic is claimName against the names taken in this row only.
func (m *Mapper) claimDynamic(name []byte, stable bool) bool {
	return m.claimTagged(name, nameTag(name), stable)
}

func (m *Mapper) claimTagged(name []byte, t uint32, stable bool) bool {
	if len(m.dyn) < 32 {
		for _, d := range m.dyn {
			if d.tag == t && d.name == b2s(name) {
				return false
			}
		}
	} else {
		if len(m.seen) == 0 {
			for _, d := range m.dyn {
				m.seen[xxh3.HashString(d.name)] = struct{}{}
			}
		}
		h := xxh3.Hash(name)
		if _, dup := m.seen[h]; dup {
			return false
		}
		m.seen[h] = struct{}{}
	}
	if !stable {
		start := len(m.dynBuf)
		m.dynBuf = append(m.dynBuf, name...)
		name = m.dynBuf[start:]
	}
	m.dyn = append(m.dyn, dynName{name: b2s(name), tag: t})
	return true
}

// dynName is a dynamic name taken in this row. Its bytes are in dynBuf
// (which only grows within a row, so earlier names stay valid even when it
// moves) or in the batch's own text.
type dynName struct {
	name string
	tag  uint32
}

// nameTag is a cheap summary of a name: equal names have equal tags.
func nameTag(name []byte) uint32 {
	if len(name) == 0 {
		return 0
	}
	return uint32(len(name))<<16 | uint32(name[0])<<8 | uint32(name[len(name)-1])
}

// bloom1k is a one-hash Bloom filter over name tags: a few dozen fixed
// names leave most of its 1024 bits clear.
type bloom1k [16]uint64

func bloomBit(t uint32) uint64 { return (uint64(t) * 0x9e3779b97f4a7c15) >> 54 }

func (b *bloom1k) add(t uint32) {
	h := bloomBit(t)
	b[h>>6] |= 1 << (h & 63)
}

func (b *bloom1k) has(t uint32) bool {
	h := bloomBit(t)
	return b[h>>6]&(1<<(h&63)) != 0
}

// keyBytes writes `,"name":`; plain says that name is printable ASCII
// without '"' or '\\' (then it needs no escaping, nor checking).
func (m *Mapper) keyBytes(dst, name []byte, plain bool) []byte {
	if m.comma {
		dst = append(dst, ',')
	}
	m.comma = true
	if s := b2s(name); plain || isPlain(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		m.vouchMember(s, len(s)+2)
		return append(dst, '"', ':')
	}
	n := len(dst)
	dst = appendNonPlain(dst, b2s(name))
	m.vouchMember(b2s(name), len(dst)-n)
	return append(dst, ':')
}

// appendText appends row i as plain text (a map key inside a dotted name).
func (v *venc) appendText(dst []byte, i int) []byte {
	switch v.kind {
	case kString:
		return append(dst, v.str(i)...)
	case kBinary:
		return append(dst, v.bin(i)...)
	}
	start := len(dst)
	dst = v.appendValue(dst, i)
	if len(dst)-start >= 2 && dst[start] == '"' && dst[len(dst)-1] == '"' {
		copy(dst[start:], dst[start+1:len(dst)-1])
		dst = dst[:len(dst)-2]
	}
	return dst
}

// appendRawJSON appends a JSON document held in a text column (nested in
// a list or struct, where it is not flattened); text that is not JSON is
// kept as a string.
func appendRawJSON(dst []byte, s string) []byte {
	if fastjson.Validate(s) != nil {
		return jsonw.String(dst, s)
	}
	return append(dst, s...)
}
