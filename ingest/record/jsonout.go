package record

import (
	"strings"
	"unsafe"
)

// maxRunes is the length to which every string (event name, keys, values) is
// truncated, as the import API documents ("We truncate all strings down to
// 255 characters").
const maxRunes = 255

// truncate cuts s to maxRunes runes. Any string at most maxRunes bytes long is
// short enough, which skips the rune count on almost every string.
func truncate(s string) string {
	if len(s) <= maxRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == maxRunes {
			return s[:i]
		}
		n++
	}
	return s
}

// sanitize makes text from a record safe to echo in a Failure: valid UTF-8,
// at most maxRunes runes, and a copy (the input usually points into parser
// memory that the next record overwrites).
func sanitize(s string) string {
	return strings.Clone(truncate(strings.ToValidUTF8(s, "\uFFFD")))
}

// b2s views b as a string without copying. Only for strings that are used
// while b is unchanged (lookups, comparisons, copying into the arena).
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. When the record contained no
// backslash at all, its decoded strings cannot contain a quote, a backslash or
// a control character (the scanner rejected raw ones), so they are copied as
// they are; otherwise each byte is checked.
func appendString(dst []byte, s string, escapes bool) []byte {
	dst = append(dst, '"')
	if !escapes {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
