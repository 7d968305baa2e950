package lookup

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

// maxExactInt is 2^53: integers beyond it lose digits as float64, the type
// every JSON reader (and Mixpanel's own) gives numbers.
const maxExactInt = 1 << 53

// cellParser types one non-empty cell and appends its JSON encoding. It
// keeps a fastjson.Parser so list cells are parsed without allocating a
// parser per cell.
type cellParser struct {
	p fastjson.Parser
}

func (c *cellParser) append(dst []byte, cell string) []byte {
	switch {
	case strings.EqualFold(cell, "true"):
		return append(dst, "true"...)
	case strings.EqualFold(cell, "false"):
		return append(dst, "false"...)
	case isNumber(cell):
		return append(dst, cell...) // JSON syntax already, and exact
	}
	if t, ok := parseTime(cell); ok {
		return jsonw.String(dst, t)
	}
	if out, ok := c.appendList(dst, cell); ok {
		return out
	}
	return jsonw.String(dst, cell)
}

// isNumber accepts JSON numbers (no leading zeros, sign only in front, no
// "1." or ".5") that a float64 holds: finite, and exact for integers.
func isNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && isDigit(s[i]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	integer := i == len(s)
	if i < len(s) && s[i] == '.' {
		if i++; i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		if i++; i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i != len(s) {
		return false
	}
	if integer {
		n, err := strconv.ParseInt(s, 10, 64)
		return err == nil && n >= -maxExactInt && n <= maxExactInt
	}
	_, err := strconv.ParseFloat(s, 64) // fails on overflow and underflow
	return err == nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseTime recognises an RFC 3339 timestamp (date, 'T', time, zone) and
// returns it in UTC. The shape test first keeps time.Parse off the common
// path of ordinary strings.
func parseTime(s string) (string, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' {
		return "", false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", false
	}
	return t.UTC().Format(time.RFC3339Nano), true
}

// appendList recognises a JSON array of strings and re-encodes it
// compactly; any other JSON (numbers in the list, objects) is left to be a
// plain string, which is what the documentation promises for lists.
func (c *cellParser) appendList(dst []byte, cell string) ([]byte, bool) {
	if len(cell) < 2 || cell[0] != '[' || cell[len(cell)-1] != ']' {
		return dst, false
	}
	v, err := c.p.Parse(cell)
	if err != nil || v.Type() != fastjson.TypeArray {
		return dst, false
	}
	items := v.GetArray()
	for _, it := range items {
		if it.Type() != fastjson.TypeString {
			return dst, false
		}
	}
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonw.String(dst, string(it.GetStringBytes()))
	}
	return append(dst, ']'), true
}
