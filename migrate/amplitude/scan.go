package amplitude

import (
	"encoding/binary"
	"math/bits"

	"github.com/tributary-dev/tributary/internal/jsonscan"
)

// The transform's fast path reads an export line in one pass instead of
// building fastjson's parse tree: it notes where each top-level value is
// and the members of event_properties and user_properties, then writes
// the record by copying those bytes. It accepts only lines fastjson
// accepts and writes exactly what the tree path (appendRecordTree) writes
// for them; anything else (a malformed line, a bad event_time, deep
// nesting, an escaped top-level key, NaN…) goes to the tree path, which
// also words the errors.
//
// What the copy must reproduce is what fastjson's MarshalTo does with a
// value it has not been asked to unescape: it drops the whitespace between
// tokens and keeps every string's and number's bytes as they were. A value
// the tree path does unescape (a mapped field's string, a property name)
// is unescaped here too, by parsing that one string with fastjson.

// vflags is what the scanner learns of a value: its kind in the low bits,
// and what copying it needs. One word, so a value is returned in
// registers and stored whole.
type vflags uint32

const (
	kNull vflags = iota
	kString
	kNumber
	kBool
	kObject
	kArray
	kindMask vflags = 7

	fEsc vflags = 8  // a string holding a backslash: its text needs unescaping
	fWS  vflags = 16 // whitespace between tokens inside: a copy drops it
	// For the record's vouch (vouch.go) and the quoting of mapped fields:
	fCtl  vflags = 32 // a string holding a control byte outside escapes
	fHigh vflags = 64 // a string holding a byte ≥ 0x80 outside escapes
)

func (f vflags) kind() vflags { return f & kindMask }

// val is a scanned value: its bytes in the line and its flags.
type val struct {
	span
	f vflags
}

// member is one member of event_properties or user_properties.
type member struct{ key, val val }

// maxScanDepth bounds nesting on the fast path (fastjson allows 300);
// deeper lines take the tree path.
const maxScanDepth = 64

// lineScanner reads one line; its members slice is reused across lines.
// Its methods take the index where a token starts and return the index
// after it, or -1 where the line is not what they accept.
type lineScanner struct {
	b       []byte
	members []member
}

// skipWS returns the index of the first non-whitespace byte at or after i,
// with fWS when it skipped any.
func (s *lineScanner) skipWS(i int) (int, vflags) {
	if i >= len(s.b) || !jsonscan.IsSpace(s.b[i]) {
		return i, 0
	}
	for i++; i < len(s.b) && jsonscan.IsSpace(s.b[i]); i++ {
	}
	return i, fWS
}

// str scans the string starting at b[i] == '"'. Its end is the first
// quote not escaped by a backslash, as in fastjson; escapes are not
// checked, since no path copies them differently than fastjson does.
// Eight bytes at a time: most strings hold nothing but plain bytes.
func (s *lineScanner) str(i int) (int, vflags) {
	f := kString
	b := s.b
	j := i + 1
	var high uint64 // the bytes passed, or-ed: their top bit says fHigh
	for {
		for j+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[j:])
			m := jsonscan.Special(w)
			if m == 0 {
				high |= w
				j += 8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			high |= w & (1<<(8*k) - 1)
			j += k
			break
		}
		if j >= len(b) {
			return -1, 0
		}
		switch c := b[j]; {
		case c == '"':
			if high&jsonscan.MSB != 0 {
				f |= fHigh
			}
			return j + 1, f
		case c == '\\':
			f |= fEsc
			j += 2
		case c < 0x20:
			f |= fCtl
			j++
		default: // fewer than eight bytes left
			high |= uint64(c)
			j++
		}
	}
}

// value scans the value starting at b[i]. Members of an object go to
// s.members when collect is set (only the top level's event and user
// properties collect).
func (s *lineScanner) value(i, depth int, collect bool) (int, vflags) {
	if i >= len(s.b) || depth > maxScanDepth {
		return -1, 0
	}
	switch c := s.b[i]; {
	case c == '"':
		return s.str(i)
	case c == '{':
		return s.object(i, depth, collect)
	case c == '[':
		return s.array(i, depth)
	case c == 't':
		return s.literal(i, "true", kBool)
	case c == 'f':
		return s.literal(i, "false", kBool)
	case c == 'n':
		return s.literal(i, "null", kNull)
	case c == '-' || c >= '0' && c <= '9':
		return s.number(i)
	}
	return -1, 0
}

func (s *lineScanner) literal(i int, lit string, k vflags) (int, vflags) {
	end := i + len(lit)
	if end > len(s.b) || string(s.b[i:end]) != lit {
		return -1, 0 // fastjson reads "nan" here as a number: tree path
	}
	return end, k
}

// number takes fastjson's span of a number, the run of [0-9.eE+-] bytes,
// which fastjson copies unchecked. A run fastjson treats specially (a lone
// sign, "-inf") is left to the tree path.
func (s *lineScanner) number(i int) (int, vflags) {
	j := i
	for ; j < len(s.b); j++ {
		c := s.b[j]
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+') {
			break
		}
	}
	if s.b[i] == '-' && (j-i < 2 || s.b[i+1] < '0' || s.b[i+1] > '9') {
		return -1, 0
	}
	return j, kNumber
}

func (s *lineScanner) array(i, depth int) (int, vflags) {
	j, f := s.skipWS(i + 1)
	f |= kArray
	if j < len(s.b) && s.b[j] == ']' {
		return j + 1, f
	}
	for {
		end, ef := s.value(j, depth+1, false)
		if end < 0 {
			return -1, 0
		}
		var ws vflags
		j, ws = s.skipWS(end)
		f |= ws | ef&fWS
		if j >= len(s.b) {
			return -1, 0
		}
		switch s.b[j] {
		case ',':
			j, ws = s.skipWS(j + 1)
			f |= ws
		case ']':
			return j + 1, f
		default:
			return -1, 0
		}
	}
}

func (s *lineScanner) object(i, depth int, collect bool) (int, vflags) {
	j, f := s.skipWS(i + 1)
	f |= kObject
	if j < len(s.b) && s.b[j] == '}' {
		return j + 1, f
	}
	for {
		kend, kf, vstart := s.key(j)
		if vstart < 0 {
			return -1, 0
		}
		vend, vf := s.value(vstart, depth+1, false)
		if vend < 0 {
			return -1, 0
		}
		if collect {
			s.members = append(s.members, member{val{span{j, kend}, kf}, val{span{vstart, vend}, vf}})
		}
		var ws vflags
		j, ws = s.skipWS(vend)
		f |= ws | (kf|vf)&fWS
		if j >= len(s.b) {
			return -1, 0
		}
		switch s.b[j] {
		case ',':
			j, ws = s.skipWS(j + 1)
			f |= ws
		case '}':
			return j + 1, f
		default:
			return -1, 0
		}
	}
}

// key scans `"key" :` from b[i] and the whitespace after it: it returns
// the key's end and flags (fWS for whitespace around the colon, which a
// copy of the object drops) and where the value starts.
func (s *lineScanner) key(i int) (end int, f vflags, next int) {
	if i >= len(s.b) || s.b[i] != '"' {
		return 0, 0, -1
	}
	end, f = s.str(i)
	if end < 0 {
		return 0, 0, -1
	}
	j, ws1 := s.skipWS(end)
	if j >= len(s.b) || s.b[j] != ':' {
		return 0, 0, -1
	}
	j, ws2 := s.skipWS(j + 1)
	return end, f | ws1 | ws2, j
}

// appendCompact appends v as fastjson's MarshalTo writes an unescaped
// value: its bytes without the whitespace between tokens.
func appendCompact(dst, line []byte, v val) []byte {
	b := v.of(line)
	if v.f&fWS == 0 {
		return append(dst, b...)
	}
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr && c == '\\':
			dst = append(dst, c, b[i+1])
			i++
			continue
		case c == '"':
			inStr = !inStr
		case !inStr && jsonscan.IsSpace(c):
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
