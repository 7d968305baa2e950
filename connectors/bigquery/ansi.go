package bigquery

import (
	"strings"
	"unicode"
)

// ansiTableNames rewrites ANSI double-quoted table names after FROM or
// JOIN ("dataset"."table", as connectors.QuoteTable renders them for the
// other warehouses) into GoogleSQL backtick identifiers.
//
// Why: queries written against the shared ANSI quoting must keep working
// here, and in GoogleSQL a double-quoted token in that position is a string
// literal, which is always a syntax error there; so the rewrite only turns
// queries BigQuery would refuse into valid ones and cannot change the
// meaning of a valid query. Strings, comments and backtick identifiers
// elsewhere are copied unchanged.
func ansiTableNames(q string) string {
	var out strings.Builder
	prev := "" // last keyword or punctuation seen, lowercased
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '-' && strings.HasPrefix(q[i:], "--"), c == '#':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i
			}
			out.WriteString(q[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			j := strings.Index(q[i+2:], "*/")
			end := len(q)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			out.WriteString(q[i:end])
			i = end
		case c == '"' && (prev == "from" || prev == "join") && !strings.HasPrefix(q[i:], `"""`):
			// A dotted path of double-quoted parts.
			for {
				name, n, ok := ansiIdent(q[i:])
				if !ok {
					break
				}
				out.WriteString(quoteIdent(name))
				i += n
				if i+1 < len(q) && q[i] == '.' && q[i+1] == '"' {
					out.WriteByte('.')
					i++
					continue
				}
				break
			}
			prev = "name"
		case c == '\'' || c == '"' || c == '`':
			n := quotedLen(q[i:])
			out.WriteString(q[i : i+n])
			i += n
			prev = "literal"
		case isWord(rune(c)):
			j := i
			for j < len(q) && isWord(rune(q[j])) {
				j++
			}
			// A string prefix (r"…", b'…') belongs to the literal that follows.
			if j < len(q) && (q[j] == '\'' || q[j] == '"') && len(q[i:j]) <= 2 && strings.Trim(strings.ToLower(q[i:j]), "rb") == "" {
				n := quotedLen(q[j:])
				out.WriteString(q[i : j+n])
				i = j + n
				prev = "literal"
				continue
			}
			prev = strings.ToLower(q[i:j])
			out.WriteString(q[i:j])
			i = j
		default:
			if !unicode.IsSpace(rune(c)) {
				prev = string(c)
			}
			out.WriteByte(c)
			i++
		}
	}
	return out.String()
}

// cleanQuery prepares a user's query for wrapping in a subquery: ANSI
// table names rewritten, and a trailing semicolon (harmless on its own,
// a syntax error inside parentheses) dropped.
func cleanQuery(q string) string {
	q = strings.TrimSpace(q)
	for strings.HasSuffix(q, ";") {
		q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	}
	return ansiTableNames(q)
}

func isWord(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// ansiIdent parses one ANSI "quoted identifier" ("" is a quote) at the
// start of s and returns its name and length.
func ansiIdent(s string) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), i + 1, b.Len() > 0
	}
	return "", 0, false
}

// quotedLen is the length of the GoogleSQL quoted token (string, triple-
// quoted string or backtick identifier, with backslash escapes) at the
// start of s; an unterminated one runs to the end.
func quotedLen(s string) int {
	q := s[:1]
	if len(s) >= 3 && s[1] == s[0] && s[2] == s[0] && s[0] != '`' {
		q = s[:3]
	}
	for i := len(q); i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if strings.HasPrefix(s[i:], q) {
			return i + len(q)
		}
	}
	return len(s)
}
