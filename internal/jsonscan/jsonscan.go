// Package jsonscan holds the byte-level primitives that Tributary's
// hand-written JSON scanners share (ingest/record, ingest/where,
// engine/mapping, migrate/amplitude): JSON's four blanks, the four hex
// digits of a \uXXXX escape, and the word-at-a-time test for the bytes a
// string scanner must stop at. The scanners keep their own loops, which
// accept different things (RFC 8259 strictly, or fastjson's leniency), and
// read these helpers from strings and byte slices alike.
//
// Every function here is small enough to inline; they sit on the hot paths
// of /track, /import, warehouse syncs and migrations.
package jsonscan

const (
	// LSB has the low bit of every byte of a word set.
	LSB = 0x0101010101010101
	// MSB has the high bit of every byte of a word set.
	MSB = 0x8080808080808080
)

// Special flags (in the high bit of each byte) the bytes of the
// little-endian word v that are '"', '\\' or below 0x20. Only the lowest
// flag is exact: a borrow may set flags above it, so use it only to find
// the first such byte.
func Special(v uint64) uint64 {
	q := v ^ (LSB * '"')
	b := v ^ (LSB * '\\')
	return (((q - LSB) &^ q) | ((b - LSB) &^ b) | ((v - LSB*0x20) &^ v)) & MSB
}

// IsSpace reports whether c is one of JSON's blanks: space, tab, LF, CR.
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// SkipSpace returns the index of the first byte at or after i that is not
// a JSON blank (len(s) when there is none).
func SkipSpace[T ~string | ~[]byte](s T, i int) int {
	for i < len(s) && s[i] <= ' ' && IsSpace(s[i]) {
		i++
	}
	return i
}

// Hex4 parses s[i:i+4] as four hex digits, either case, as a \uXXXX
// escape's code unit; ok is false when fewer than four bytes remain or one
// is not a hex digit.
func Hex4[T ~string | ~[]byte](s T, i int) (r rune, ok bool) {
	if i < 0 || i+4 > len(s) {
		return 0, false
	}
	for k := i; k < i+4; k++ {
		c := s[k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
