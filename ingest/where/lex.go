package where

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonscan"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // keyword or name, matched case-insensitively by the parser
	tString         // val holds the decoded string
	tNumber         // text is a JSON number
	tPunct          // ( ) [ ] ,
	tOp             // == != < > <= >=
)

type token struct {
	kind tokKind
	pos  int    // byte offset of the token's first byte
	text string // source text, for messages and keyword matching
	val  string // decoded value of a string token
}

// String describes the token the way error messages quote it.
func (t token) String() string {
	if t.kind == tEOF {
		return "end of expression"
	}
	return strconv.Quote(t.text)
}

// lex splits src into tokens, ending with a tEOF token at len(src).
// Everything is tokenised up front: expressions are short, and the parser
// then needs no lookahead bookkeeping.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'':
			val, end, err := lexString(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tString, pos: i, text: src[i:end], val: val})
			i = end
		case c == '-' || isDigit(c):
			end := lexNumber(src, i)
			if end == i {
				return nil, &SyntaxError{Offset: i, Msg: fmt.Sprintf("unexpected %q", c)}
			}
			toks = append(toks, token{kind: tNumber, pos: i, text: src[i:end]})
			i = end
		case strings.IndexByte("()[],", c) >= 0:
			toks = append(toks, token{kind: tPunct, pos: i, text: src[i : i+1]})
			i++
		case c == '=' || c == '!' || c == '<' || c == '>':
			n := 1
			if i+1 < len(src) && src[i+1] == '=' {
				n = 2
			}
			op := src[i : i+n]
			switch op {
			case "=":
				return nil, &SyntaxError{Offset: i, Msg: `unexpected "=" (use "==" to compare)`}
			case "!":
				return nil, &SyntaxError{Offset: i, Msg: `unexpected "!" (use "not" or "!=")`}
			}
			toks = append(toks, token{kind: tOp, pos: i, text: op})
			i += n
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && (isIdentStart(src[j]) || isDigit(src[j])) {
				j++
			}
			toks = append(toks, token{kind: tIdent, pos: i, text: src[i:j]})
			i = j
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, &SyntaxError{Offset: i, Msg: fmt.Sprintf("unexpected character %q", r)}
		}
	}
	return append(toks, token{kind: tEOF, pos: len(src)}), nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == '$' || (c|0x20) >= 'a' && (c|0x20) <= 'z' }

// lexNumber returns the end of the JSON number starting at i, or i when
// there is none. JSON's grammar (no leading zeros, no bare "1." or ".5")
// keeps the canonical form equal to the source and parseable by fastjson.
func lexNumber(s string, i int) int {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && isDigit(s[j]):
		for j < len(s) && isDigit(s[j]) {
			j++
		}
	default:
		return i
	}
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		for j += 2; j < len(s) && isDigit(s[j]); j++ {
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for j = k; j < len(s) && isDigit(s[j]); j++ {
			}
		}
	}
	return j
}

// lexString decodes the quoted string at i (either quote) with JSON escapes
// plus \'. It returns the value and the offset just past the closing quote.
func lexString(s string, i int) (string, int, error) {
	q := s[i]
	var b strings.Builder
	for j := i + 1; j < len(s); {
		c := s[j]
		switch {
		case c == q:
			return b.String(), j + 1, nil
		case c == '\\':
			r, n, ok := unescape(s[j:])
			if !ok {
				return "", 0, &SyntaxError{Offset: j, Msg: fmt.Sprintf("invalid escape %q", s[j:min(j+n, len(s))])}
			}
			b.WriteRune(r)
			j += n
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			j++
		default:
			r, n := utf8.DecodeRuneInString(s[j:])
			if r == utf8.RuneError && n == 1 {
				// Property names and values are valid UTF-8 (import checks
				// it), so an invalid byte here could never match anything.
				return "", 0, &SyntaxError{Offset: j, Msg: "invalid UTF-8 in string"}
			}
			b.WriteString(s[j : j+n])
			j += n
		}
	}
	return "", 0, &SyntaxError{Offset: i, Msg: "unterminated string"}
}

// unescape decodes the escape sequence at the start of s (s[0] == '\\'),
// returning the rune and the bytes consumed. A lone surrogate becomes
// U+FFFD, as in encoding/json.
func unescape(s string) (rune, int, bool) {
	if len(s) < 2 {
		return 0, len(s), false
	}
	switch s[1] {
	case '"', '\'', '\\', '/':
		return rune(s[1]), 2, true
	case 'b':
		return '\b', 2, true
	case 'f':
		return '\f', 2, true
	case 'n':
		return '\n', 2, true
	case 'r':
		return '\r', 2, true
	case 't':
		return '\t', 2, true
	case 'u':
		r, ok := jsonscan.Hex4(s, 2)
		if !ok {
			return 0, min(6, len(s)), false
		}
		if utf16.IsSurrogate(r) {
			if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				if r2, ok := jsonscan.Hex4(s, 8); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						return d, 12, true
					}
				}
			}
			return utf8.RuneError, 6, true
		}
		return r, 6, true
	}
	_, n := utf8.DecodeRuneInString(s[1:])
	return 0, 1 + n, false
}
