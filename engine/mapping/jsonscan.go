package mapping

import (
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonscan"
)

// The scanning primitives of the flattener (jsonflat.go). Each accepts
// exactly what the fastjson code named in its comment accepts.

// String byte classes for the scanner.
const (
	scPlain = iota
	scQuote
	scBackslash
	scControl
)

var strClass = func() (t [256]uint8) {
	for c := 0; c < 0x20; c++ {
		t[c] = scControl
	}
	t['"'] = scQuote
	t['\\'] = scBackslash
	return t
}()

var isNumByte = func() (t [256]bool) {
	for _, c := range "0123456789.-eE+" {
		t[c] = true
	}
	return t
}()

// Flags scanString reports about a string body.
const (
	hasEscape  = 1 << iota // a backslash
	hasControl             // a byte below 0x20
	hasHigh                // a byte of 0x80 or more outside escapes
)

// scanString finds the closing quote of the string whose body starts at
// i (the first '"' after an even run of backslashes, as fastjson's
// parseRawString), and reports which of the flags above the body has. It
// tests eight bytes at a time for one that needs a look.
func scanString(s string, i int) (end int, flags uint8, ok bool) {
	var high uint64
	for i < len(s) {
		if i+8 <= len(s) {
			v := load64(s, i)
			m := jsonscan.Special(v)
			if m == 0 {
				high |= v
				i += 8
				continue
			}
			k := bits.TrailingZeros64(m) >> 3
			high |= v & (1<<(8*k) - 1)
			i += k
		}
		switch c := s[i]; strClass[c] {
		case scPlain:
			high |= uint64(c)
		case scQuote:
			if high&jsonscan.MSB != 0 {
				flags |= hasHigh
			}
			return i, flags, true
		case scBackslash:
			flags |= hasEscape
			i++ // the escaped byte, whatever it is
		case scControl:
			flags |= hasControl
		}
		i++
	}
	return i, flags, false
}

// scanNumber is fastjson's parseRawNumber: it returns the index past the
// number starting at s[i].
func scanNumber(s string, i int) (int, bool) {
	for j := i; j < len(s); j++ {
		if isNumByte[s[j]] {
			continue
		}
		if n := j - i; n == 0 || n == 1 && (s[i] == '-' || s[i] == '+') {
			if len(s)-j >= 3 && (equalFoldASCII(s[j:j+3], "inf") || equalFoldASCII(s[j:j+3], "nan")) {
				return j + 3, true
			}
			return j, false
		}
		return j, true
	}
	return len(s), true
}

// equalFoldASCII compares a with the lower-case ASCII word w ignoring case
// (fastjson's strings.EqualFold: no other rune folds to these letters).
func equalFoldASCII(a, w string) bool {
	for k := 0; k < len(w); k++ {
		if a[k]|0x20 != w[k] {
			return false
		}
	}
	return true
}

// unescapeFJ appends s unescaped as fastjson's unescapeStringBestEffort
// does: unknown or short escapes stay as written, a lone surrogate keeps
// its \uXXXX text, and a surrogate followed by any \uXXXX is decoded as a
// pair (U+FFFD when it is not one).
func unescapeFJ(b []byte, s string) []byte {
	for len(s) > 0 {
		n := indexBackslash(s)
		if n < 0 {
			return append(b, s...)
		}
		b = append(b, s[:n]...)
		s = s[n+1:]
		if len(s) == 0 {
			return b
		}
		ch := s[0]
		s = s[1:]
		switch ch {
		case '"', '\\', '/':
			b = append(b, ch)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			x, ok := jsonscan.Hex4(s, 0)
			if !ok {
				b = append(b, `\u`...)
				break
			}
			xs := s[:4]
			s = s[4:]
			if !utf16.IsSurrogate(rune(x)) {
				b = utf8.AppendRune(b, rune(x))
				break
			}
			if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
				b = append(append(b, `\u`...), xs...)
				break
			}
			x1, ok := jsonscan.Hex4(s, 2)
			if !ok {
				b = append(append(b, `\u`...), xs...)
				break
			}
			b = utf8.AppendRune(b, utf16.DecodeRune(rune(x), rune(x1)))
			s = s[6:]
		default:
			b = append(b, '\\', ch)
		}
	}
	return b
}

func indexBackslash(s string) int {
	for k := 0; k < len(s); k++ {
		if s[k] == '\\' {
			return k
		}
	}
	return -1
}
