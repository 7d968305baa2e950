package mapping

import (
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonscan"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// The flattener scans a JSON-properties document once and appends its
// properties straight to the record. Its output is byte for byte what the
// earlier fastjson parse-and-re-encode produced (flatten_oracle_test.go
// keeps that code as the oracle), quirks included, because $insert_id
// hashes the written properties: a changed byte would change the ids of
// rows already imported, and dedup would no longer absorb a re-read. So:
//
//   - the grammar is fastjson's, which is looser than RFC 8259: numbers are
//     any run of [0-9.eE+-] (and NaN/Inf spellings), strings may hold raw
//     control bytes and unknown escapes, the nesting limit is 300;
//   - names and strings directly in an object are unescaped (best effort,
//     as fastjson does) and strings re-quoted: verbatim when they hold no
//     quote, backslash or control byte, else with strconv.Quote;
//   - arrays, and everything inside them, are copied token by token
//     without whitespace: strings and keys keep their escapes as written.

// fjMaxDepth is fastjson.MaxDepth: a document nested deeper is not JSON.
const fjMaxDepth = 300

// flattenJSON appends the properties of the JSON object in text, named
// under prefix. It reports false when text is not an object, or not JSON;
// then nothing was written or claimed.
func (m *Mapper) flattenJSON(dst []byte, text, prefix string) ([]byte, bool) {
	i := jsonscan.SkipSpace(text, 0)
	if i >= len(text) || text[i] != '{' {
		return dst, false
	}
	start, comma, nDyn, nDynBuf := len(dst), m.comma, len(m.dyn), len(m.dynBuf)
	clean, members := m.clean, m.members
	pfx := len(m.scratch)
	m.scratch = append(m.scratch, prefix...)
	var ok bool
	dst, i, ok = m.flatObject(dst, text, i+1, pfx, isPlain(prefix), 1)
	m.scratch = m.scratch[:pfx]
	if ok && jsonscan.SkipSpace(text, i) == len(text) {
		return dst, true
	}
	// Undo the claims: the hash set is rebuilt from dyn when next needed.
	m.comma, m.dyn, m.dynBuf = comma, m.dyn[:nDyn], m.dynBuf[:nDynBuf]
	m.clean, m.members = clean, members
	clear(m.seen)
	return dst[:start], false
}

// flatObject flattens the members of the object whose body starts at i
// (just past '{'); the names are m.scratch[pfx:] (plain: printable ASCII)
// joined to each key with a dot (no dot after an empty prefix). It returns
// the index past '}'.
func (m *Mapper) flatObject(dst []byte, s string, i, pfx int, plain bool, depth int) ([]byte, int, bool) {
	i = jsonscan.SkipSpace(s, i)
	if i >= len(s) {
		return dst, i, false
	}
	if s[i] == '}' {
		return dst, i + 1, true
	}
	for {
		if i >= len(s) || s[i] != '"' { // blanks are rare: look for them only then
			if i = jsonscan.SkipSpace(s, i); i >= len(s) || s[i] != '"' {
				return dst, i, false
			}
		}
		end, flags, ok := scanString(s, i+1)
		if !ok {
			return dst, i, false
		}
		key, i0 := s[i+1:end], i
		if i = end + 1; i >= len(s) || s[i] != ':' {
			if i = jsonscan.SkipSpace(s, i); i >= len(s) || s[i] != ':' {
				return dst, i, false
			}
		}
		i = jsonscan.SkipSpace(s, i+1)
		// The name is the key itself unless it needs a prefix, unescaping,
		// or must be a prefix in turn (an object).
		base := len(m.scratch)
		var name []byte
		stable := false
		if base > pfx || flags&hasEscape != 0 || i < len(s) && s[i] == '{' {
			if base > pfx {
				m.scratch = append(m.scratch, '.')
			}
			if flags&hasEscape != 0 {
				m.scratch = unescapeFJ(m.scratch, key)
			} else {
				m.scratch = append(m.scratch, key...)
			}
			name = m.scratch[pfx:]
		} else {
			// cap runs to the end of the text: appendWide may read that far.
			name, stable = unsafe.Slice(unsafe.StringData(key), len(s)-(i0+1))[:len(key)], true
		}
		if i < len(s) && s[i] == '"' && depth < fjMaxDepth { // the most common member
			var end int
			var vflags uint8
			if end, vflags, ok = scanString(s, i+1); ok {
				if m.claimName(name, stable) {
					dst = m.appendMember(dst, name, plain && flags == 0, s, i+1, end, vflags)
				}
				i = end + 1
			}
		} else {
			dst, i, ok = m.flatMember(dst, s, i, pfx, name, nameFlags(plain && flags == 0, stable), depth+1)
		}
		m.scratch = m.scratch[:base]
		if !ok {
			return dst, i, false
		}
		i = jsonscan.SkipSpace(s, i)
		if i >= len(s) {
			return dst, i, false
		}
		switch s[i] {
		case ',':
			i++
		case '}':
			return dst, i + 1, true
		default:
			return dst, i, false
		}
	}
}

// flatMember writes the value at s[i] (not a string: flatObject writes
// those) under name: a null is left out, a non-empty object is flattened
// further (name is then m.scratch[pfx:]), anything else is one property if
// the name is still free. nf says whether name is plain, needing no
// escaping, and stable, text of the batch rather than scratch.
func (m *Mapper) flatMember(dst []byte, s string, i, pfx int, name []byte, nf uint8, depth int) ([]byte, int, bool) {
	plain, stable := nf&namePlain != 0, nf&nameStable != 0
	if i >= len(s) || depth > fjMaxDepth {
		return dst, i, false
	}
	switch s[i] {
	case '{':
		j := jsonscan.SkipSpace(s, i+1)
		if j < len(s) && s[j] == '}' {
			if m.claimName(name, stable) {
				dst = m.keyBytes(dst, name, plain)
				dst = append(dst, "{}"...)
			}
			return dst, j + 1, true
		}
		return m.flatObject(dst, s, i+1, pfx, plain, depth)
	case 'n':
		if len(s)-i >= 4 && s[i:i+4] == "null" {
			return dst, i + 4, true
		}
	}
	emit := m.claimName(name, stable)
	if !emit {
		return copyValue(dst, s, i, depth, false)
	}
	dst = m.keyBytes(dst, name, plain)
	n := len(dst)
	dst, i, ok := copyValue(dst, s, i, depth, true)
	if ok {
		m.vouchValue(dst[n:])
	}
	return dst, i, ok
}

// copyValue copies the value at s[i] without whitespace (appending only
// if emit) and returns the index past it; depth is the value's own.
func copyValue(dst []byte, s string, i, depth int, emit bool) ([]byte, int, bool) {
	if i >= len(s) || depth > fjMaxDepth {
		return dst, i, false
	}
	switch c := s[i]; c {
	case '"':
		end, flags, ok := scanString(s, i+1)
		if !ok || emit && !copyableString(s[i+1:end], flags) {
			return dst, i, false
		}
		if emit {
			dst = append(dst, s[i:end+1]...)
		}
		return dst, end + 1, true
	case '[', '{':
		return copyContainer(dst, s, i, depth, emit)
	case 't', 'f', 'n':
		lit := "true"
		if c == 'f' {
			lit = "false"
		} else if c == 'n' {
			lit = "null"
		}
		if len(s)-i >= len(lit) && s[i:i+len(lit)] == lit {
			if emit {
				dst = append(dst, lit...)
			}
			return dst, i + len(lit), true
		}
		if c != 'n' || len(s)-i < 3 || !equalFoldASCII(s[i:i+3], "nan") || emit {
			return dst, i, false // a NaN is skipped, never written (see strictJSONNumber)
		}
		return dst, i + 3, true
	}
	end, ok := scanNumber(s, i)
	if !ok || emit && !strictJSONNumber(s[i:end]) {
		return dst, i, false
	}
	if emit {
		dst = appendRaw(dst, s, i, end)
	}
	return dst, end, true
}

// copyContainer copies the array or object at s[i] as fastjson's
// MarshalTo wrote it: keys and strings exactly as in the source.
func copyContainer(dst []byte, s string, i, depth int, emit bool) ([]byte, int, bool) {
	open := s[i]
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	if emit {
		dst = append(dst, open)
	}
	i = jsonscan.SkipSpace(s, i+1)
	if i >= len(s) {
		return dst, i, false
	}
	if s[i] == closer {
		if emit {
			dst = append(dst, closer)
		}
		return dst, i + 1, true
	}
	for {
		i = jsonscan.SkipSpace(s, i)
		var ok bool
		if open == '{' {
			if i >= len(s) || s[i] != '"' {
				return dst, i, false
			}
			end, flags, ok := scanString(s, i+1)
			if !ok || emit && !copyableString(s[i+1:end], flags) {
				return dst, i, false
			}
			if emit {
				dst = append(dst, s[i:end+1]...)
				dst = append(dst, ':')
			}
			i = jsonscan.SkipSpace(s, end+1)
			if i >= len(s) || s[i] != ':' {
				return dst, i, false
			}
			i = jsonscan.SkipSpace(s, i+1)
		}
		if dst, i, ok = copyValue(dst, s, i, depth+1, emit); !ok {
			return dst, i, false
		}
		i = jsonscan.SkipSpace(s, i)
		if i >= len(s) {
			return dst, i, false
		}
		switch s[i] {
		case ',':
			if emit {
				dst = append(dst, ',')
			}
			i++
		case closer:
			if emit {
				dst = append(dst, closer)
			}
			return dst, i + 1, true
		default:
			return dst, i, false
		}
	}
}

// Name flags for flatMember.
const (
	namePlain = 1 << iota
	nameStable
)

func nameFlags(plain, stable bool) uint8 {
	var nf uint8
	if plain {
		nf |= namePlain
	}
	if stable {
		nf |= nameStable
	}
	return nf
}

// appendMember writes `,"name":` and a string member's value: doc[from:to]
// is the source text between its quotes, re-encoded as fastjson did
// (unescaped, then quoted verbatim, or with strconv.Quote when it holds
// '"', '\\' or a control byte). plain says that name needs no escaping.
func (m *Mapper) appendMember(dst, name []byte, plain bool, doc string, from, to int, flags uint8) []byte {
	if m.comma {
		dst = append(dst, ',')
	}
	m.comma = true
	if !plain && !isPlain(b2s(name)) {
		n := len(dst)
		dst = appendNonPlain(dst, b2s(name))
		m.vouchMember(b2s(name), len(dst)-n)
		dst = append(dst, ':')
	} else {
		dst = append(dst, '"')
		dst = appendWide(dst, name)
		dst = append(dst, '"', ':')
		m.vouchMember(b2s(name), len(name)+2)
	}
	raw := doc[from:to]
	if flags&(hasEscape|hasControl) == 0 {
		dst = append(dst, '"')
		dst = appendRaw(dst, doc, from, to)
		if len(raw) > record.MaxCleanString || flags&hasHigh != 0 && !utf8.ValidString(raw) {
			m.clean = false
		}
		return append(dst, '"')
	}
	m.clean = false // unescaped and quoted again: rare, and the validator reads it
	s := raw
	if flags&hasEscape != 0 {
		m.unesc = unescapeFJ(m.unesc[:0], raw)
		s = b2s(m.unesc)
	}
	for k := 0; k < len(s); k++ {
		if c := s[k]; c < 0x20 || c == '"' || c == '\\' {
			return appendQuoteFJ(dst, s)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendQuoteFJ quotes s as fastjson did (strconv.Quote), which keeps the
// $insert_id of every row mapped before; where that quoting is not JSON
// (\x, \a, \v and \U escapes: control bytes, invalid UTF-8, runes past
// the BMP that are not printable) it quotes as JSON instead. Those rows
// used to fail validation, so no stored id depends on their old bytes.
func appendQuoteFJ(dst []byte, s string) []byte {
	start := len(dst)
	dst = strconv.AppendQuote(dst, s)
	for k := start + 1; k < len(dst)-1; k++ {
		if dst[k] != '\\' {
			continue
		}
		k++
		switch dst[k] {
		case 'x', 'a', 'v', 'U':
			return jsonw.String(dst[:start], s)
		}
	}
	return dst
}

// Tokens copied verbatim must be JSON, or the record would not be. Where
// fastjson was looser (numbers such as 01, +1, 1.2.3, NaN and Inf; raw
// control bytes or unknown escapes in strings inside arrays) the old
// output was not JSON and the row was refused by the validator; now the
// document is "not JSON" at once (when the token is written; a token
// that is skipped keeps fastjson's grammar), which refuses the row with a clearer
// error (or keeps a JSON property column's text as a string). No row that
// mapped to valid JSON before maps differently.

// strictJSONNumber reports whether n is a number by RFC 8259.
func strictJSONNumber(n string) bool {
	k := 0
	if k < len(n) && n[k] == '-' {
		k++
	}
	switch {
	case k < len(n) && n[k] == '0':
		k++
	case k < len(n) && n[k] >= '1' && n[k] <= '9':
		for k < len(n) && n[k] >= '0' && n[k] <= '9' {
			k++
		}
	default:
		return false
	}
	if k < len(n) && n[k] == '.' {
		k++
		d := k
		for k < len(n) && n[k] >= '0' && n[k] <= '9' {
			k++
		}
		if k == d {
			return false
		}
	}
	if k < len(n) && (n[k] == 'e' || n[k] == 'E') {
		k++
		if k < len(n) && (n[k] == '+' || n[k] == '-') {
			k++
		}
		d := k
		for k < len(n) && n[k] >= '0' && n[k] <= '9' {
			k++
		}
		if k == d {
			return false
		}
	}
	return k == len(n)
}

// copyableString reports whether a string body (between its quotes) is
// JSON as written: no raw control byte, only JSON's escapes.
func copyableString(body string, flags uint8) bool {
	if flags&hasControl != 0 {
		return false
	}
	if flags&hasEscape == 0 {
		return true
	}
	for k := 0; k < len(body); k++ {
		if body[k] != '\\' {
			continue
		}
		if k++; k >= len(body) {
			return false
		}
		switch body[k] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if _, ok := jsonscan.Hex4(body, k+1); !ok {
				return false
			}
			k += 4
		default:
			return false
		}
	}
	return true
}
