package record

import (
	"strings"
	"unsafe"

	"github.com/tributary-dev/tributary/internal/jsonw"
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

// appendString appends s as a JSON string. When the record contained no
// backslash at all, its decoded strings cannot contain a quote, a backslash or
// a control character (the scanner rejected raw ones), so they are copied as
// they are; otherwise jsonw escapes them.
func appendString(dst []byte, s string, escapes bool) []byte {
	if escapes {
		return jsonw.String(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
