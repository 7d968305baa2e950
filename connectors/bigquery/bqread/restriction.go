package bqread

import (
	"strings"
)

// Restriction translates a GoogleSQL row restriction into DuckDB SQL, for
// the shapes connectors emit: `quoted` identifiers, comparisons, AND/OR,
// string literals with backslash escapes, typed literals (TIMESTAMP,
// DATETIME, DATE, NUMERIC, BIGNUMERIC '…'), CAST(… AS INT64|FLOAT64|
// NUMERIC) and FROM_BASE64. Anything else is passed through, and DuckDB's
// error for it becomes the session's INVALID_ARGUMENT, as an unsupported
// predicate does in BigQuery.
func Restriction(r string) string {
	var out strings.Builder
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case c == '`':
			name, n := unquote(r[i:])
			out.WriteString(ident(name))
			i += n
		case c == '\'' || c == '"':
			s, n := unquote(r[i:])
			out.WriteString(str(s))
			i += n
		case isWord(c):
			j := i
			for j < len(r) && isWord(r[j]) {
				j++
			}
			word := strings.ToUpper(r[i:j])
			k := j
			for k < len(r) && r[k] == ' ' {
				k++
			}
			if k < len(r) && (r[k] == '\'' || r[k] == '"') {
				if typ, ok := literalTypes[word]; ok {
					s, n := unquote(r[k:])
					out.WriteString("CAST(" + str(s) + " AS " + typ + ")")
					i = k + n
					continue
				}
			}
			if t, ok := castTypes[word]; ok {
				word = t
			} else {
				word = r[i:j]
			}
			out.WriteString(word)
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// literalTypes are GoogleSQL typed-literal prefixes and their DuckDB types.
var literalTypes = map[string]string{
	"TIMESTAMP":  "TIMESTAMPTZ",
	"DATETIME":   "TIMESTAMP",
	"DATE":       "DATE",
	"NUMERIC":    "DECIMAL(38,9)",
	"BIGNUMERIC": "DOUBLE",
	"JSON":       "VARCHAR",
}

var castTypes = map[string]string{"INT64": "BIGINT", "FLOAT64": "DOUBLE", "NUMERIC": "DECIMAL(38,9)", "BOOL": "BOOLEAN", "STRING": "VARCHAR", "BYTES": "BLOB"}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// unquote reads the quoted token at the start of s (its first byte is
// the quote) with GoogleSQL backslash escapes, returning its value and
// length.
func unquote(s string) (string, int) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'x':
				if i+2 < len(s) {
					var v byte
					for _, h := range []byte(s[i+1 : i+3]) {
						v = v<<4 | unhex(h)
					}
					b.WriteByte(v)
					i += 2
				}
			default:
				b.WriteByte(s[i])
			}
		case c == q:
			return b.String(), i + 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), len(s)
}

func unhex(h byte) byte {
	switch {
	case h >= '0' && h <= '9':
		return h - '0'
	case h >= 'a' && h <= 'f':
		return h - 'a' + 10
	case h >= 'A' && h <= 'F':
		return h - 'A' + 10
	}
	return 0
}

func str(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
