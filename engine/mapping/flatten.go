package mapping

import (
	"unsafe"

	"github.com/valyala/fastjson"
	"github.com/zeebo/xxh3"

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
				dst = m.keyBytes(dst, name)
				dst = v.elem.appendValue(dst, j)
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
	doc, err := m.p.Parse(text)
	if err != nil || doc.Type() != fastjson.TypeObject {
		if prefix == "" { // the JSON-properties column must hold objects
			m.badJSON = true
			return dst
		}
		if m.claim([]byte(prefix)) { // not an object: keep the text
			dst = m.keyBytes(dst, []byte(prefix))
			dst = jsonw.String(dst, text)
		}
		return dst
	}
	return m.flattenObject(dst, doc.GetObject(), prefix)
}

func (m *Mapper) flattenObject(dst []byte, o *fastjson.Object, prefix string) []byte {
	o.Visit(func(k []byte, val *fastjson.Value) {
		mark := len(m.scratch)
		if prefix != "" {
			m.scratch = append(m.scratch, prefix...)
			m.scratch = append(m.scratch, '.')
		}
		m.scratch = append(m.scratch, k...)
		name := m.scratch[mark:]
		switch {
		case val.Type() == fastjson.TypeNull:
		case val.Type() == fastjson.TypeObject && val.GetObject().Len() > 0:
			dst = m.flattenObject(dst, val.GetObject(), b2s(name))
		case m.claim(name):
			dst = m.keyBytes(dst, name)
			dst = val.MarshalTo(dst)
		}
		m.scratch = m.scratch[:mark]
	})
	return dst
}

// claim reports whether name is free in this row, and takes it. Names of
// table columns and of the mapper's own fields are blocked for good; a
// row repeats a dynamic name rarely, so those are checked linearly until
// there are many, then through a hash set.
func (m *Mapper) claim(name []byte) bool {
	if _, taken := m.names[b2s(name)]; taken {
		return false
	}
	if len(m.dyn) < 32 {
		for _, at := range m.dyn {
			if string(m.dynBuf[at[0]:at[1]]) == b2s(name) {
				return false
			}
		}
	} else {
		if len(m.seen) == 0 {
			for _, at := range m.dyn {
				m.seen[xxh3.Hash(m.dynBuf[at[0]:at[1]])] = struct{}{}
			}
		}
		h := xxh3.Hash(name)
		if _, dup := m.seen[h]; dup {
			return false
		}
		m.seen[h] = struct{}{}
	}
	start := len(m.dynBuf)
	m.dynBuf = append(m.dynBuf, name...)
	m.dyn = append(m.dyn, [2]int{start, len(m.dynBuf)})
	return true
}

func (m *Mapper) keyBytes(dst, name []byte) []byte {
	if m.comma {
		dst = append(dst, ',')
	}
	m.comma = true
	dst = jsonw.String(dst, b2s(name))
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
