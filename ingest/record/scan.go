package record

import (
	"fmt"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/ingest/jsonnum"
	"github.com/tributary-dev/tributary/internal/jsonscan"
)

// scanner is a strict, allocation-free JSON validator for one record.
//
// fastjson's parser is lenient on purpose: it accepts NaN, "1-2", raw control
// characters in strings and unknown escapes (passed through verbatim), and it
// checks neither UTF-8 nor surrogate pairs. Because numbers are copied into
// the stored JSON as their raw text, this pass runs first, so everything the
// walker copies out is known to be valid. It also records which slow paths the
// record needs, so a clean record skips them.
type scanner struct {
	stack   []byte // open containers: '{' or '['
	escapes bool   // some string holds a backslash: output strings need escaping
	badUTF8 bool   // invalid UTF-8 bytes or lone surrogate escapes somewhere
	lone    bool   // lone surrogate escapes: the record must go through fixSurrogates
	big     bool   // a number out of the stored range (bigNumber): the walker names its field
}

// maxNesting bounds container nesting. fastjson refuses more than 300 levels
// (counting the innermost scalar); staying well below keeps the two passes in
// agreement, and any record this deep fails the depth rule anyway.
const maxNesting = 256

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func errAt(off int, msg string) error { return &syntaxError{off, msg} }

// scan validates b as exactly one JSON value.
func (s *scanner) scan(b []byte) error {
	s.escapes, s.badUTF8, s.lone, s.big = false, false, false, false
	st := s.stack[:0]
	defer func() { s.stack = st[:0] }()
	i := jsonscan.SkipSpace(b, 0)
	var err error
value:
	for {
		if i >= len(b) {
			return errAt(i, "unexpected end of input")
		}
		switch c := b[i]; c {
		case '{', '[':
			j := jsonscan.SkipSpace(b, i+1)
			if j < len(b) && b[j] == c+2 { // '}' is '{'+2, ']' is '['+2
				i = j + 1
				break
			}
			if len(st) == maxNesting {
				return errAt(i, fmt.Sprintf("nesting deeper than %d levels", maxNesting))
			}
			st = append(st, c)
			i = j
			if c == '{' {
				if i, err = s.member(b, i); err != nil {
					return err
				}
			}
			continue value
		case '"':
			i, err = s.str(b, i+1)
		case 't':
			i, err = literal(b, i, "true")
		case 'f':
			i, err = literal(b, i, "false")
		case 'n':
			i, err = literal(b, i, "null")
		default:
			var big bool
			i, big, err = number(b, i)
			s.big = s.big || big
		}
		if err != nil {
			return err
		}
		// A value is complete: close containers until another value is due.
		for {
			i = jsonscan.SkipSpace(b, i)
			if len(st) == 0 {
				if i < len(b) {
					return errAt(i, "unexpected data after the record")
				}
				return nil
			}
			if i >= len(b) {
				return errAt(i, "unexpected end of input")
			}
			top := st[len(st)-1]
			switch c := b[i]; {
			case c == ',':
				i = jsonscan.SkipSpace(b, i+1)
				if top == '{' {
					if i, err = s.member(b, i); err != nil {
						return err
					}
				}
				continue value
			case c == top+2:
				st = st[:len(st)-1]
				i++
			default:
				return errAt(i, fmt.Sprintf("unexpected %q after a value", c))
			}
		}
	}
}

// member validates `"key" :` and returns the index of the value.
func (s *scanner) member(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, errAt(i, "expected a quoted object key")
	}
	i, err := s.str(b, i+1)
	if err != nil {
		return i, err
	}
	i = jsonscan.SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, errAt(i, "expected ':' after an object key")
	}
	return jsonscan.SkipSpace(b, i+1), nil
}

// plain marks bytes that need no attention inside a string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str validates string content starting at i and returns the index after the
// closing quote.
func (s *scanner) str(b []byte, i int) (int, error) {
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, errAt(i, "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			s.escapes = true
			n, err := s.escape(b, i)
			if err != nil {
				return i, err
			}
			i += n
		case c < 0x20:
			return i, errAt(i, "control character in string")
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				s.badUTF8 = true
			}
			i += size
		}
	}
}

// escape validates the escape sequence at b[i] and returns its length.
func (s *scanner) escape(b []byte, i int) (int, error) {
	if i+1 >= len(b) {
		return 0, errAt(i, "unterminated string")
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
	default:
		return 0, errAt(i, fmt.Sprintf("invalid escape \\%c", b[i+1]))
	}
	r, ok := jsonscan.Hex4(b, i+2)
	if !ok {
		return 0, errAt(i, "invalid \\u escape")
	}
	if r < 0xD800 || r > 0xDFFF {
		return 6, nil
	}
	if r < 0xDC00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
		if r2, ok := jsonscan.Hex4(b, i+8); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
			return 12, nil
		}
	}
	// A lone surrogate is valid JSON syntax but not a character: it is
	// treated like invalid UTF-8 (failed in strict mode, replaced otherwise).
	s.lone, s.badUTF8 = true, true
	return 6, nil
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, errAt(i, "invalid literal")
	}
	return i + len(lit), nil
}

// number validates the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and returns its end. big
// reports a number out of the range Tributary stores (package jsonnum); the
// common number, a short integer or decimal, costs two comparisons more.
func number(b []byte, i int) (end int, big bool, err error) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return start, false, errAt(start, "invalid value")
	}
	intDigits := i - intStart
	frac, exp := false, false
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return start, false, errAt(i, "invalid number")
		}
		i, frac = j, true
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return start, false, errAt(i, "invalid number")
		}
		i, exp = j, true
	}
	return i, jsonnum.OutOfRange(b[start:i], intDigits, frac, exp), nil
}

// msgBigNumber is the failure of a property holding a number out of the
// range Tributary stores (see package jsonnum).
const msgBigNumber = jsonnum.Message

// bigNumber reports whether tok, one valid JSON number, is out of range.
func bigNumber(tok []byte) bool {
	_, big, _ := number(tok, 0)
	return big
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// isNumber reports whether s is exactly one JSON number.
func isNumber(s string) bool {
	end, big, err := number([]byte(s), 0)
	return err == nil && !big && end == len(s)
}

// fixSurrogates copies a scanned record, replacing each lone surrogate escape
// with the byte 0xFF. fastjson would otherwise keep "\ud800" as literal text
// (or swallow the next escape); 0xFF is invalid UTF-8, so the ordinary UTF-8
// handling then fails or repairs that string like any other bad byte.
func fixSurrogates(dst, b []byte) []byte {
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case !in:
			in = c == '"'
		case c == '"':
			in = false
		case c == '\\' && b[i+1] == 'u':
			r, _ := jsonscan.Hex4(b, i+2)
			if r < 0xD800 || r > 0xDFFF {
				break
			}
			if r < 0xDC00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if r2, _ := jsonscan.Hex4(b, i+8); r2 >= 0xDC00 && r2 <= 0xDFFF {
					dst = append(dst, b[i:i+12]...)
					i += 11
					continue
				}
			}
			dst = append(dst, 0xFF)
			i += 5
			continue
		case c == '\\':
			dst = append(dst, c, b[i+1])
			i++
			continue
		}
		dst = append(dst, c)
	}
	return dst
}
