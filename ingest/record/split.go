package record

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/internal/jsonscan"
)

// Errors returned by Split. The HTTP layer maps ErrTooManyRecords and
// ErrEventTooLarge to 413 and ErrMalformed to 400; the wrapped error text adds
// the byte offset or the limit that was hit.
var (
	ErrMalformed      = errors.New("malformed body")
	ErrTooManyRecords = errors.New("too many records")
	ErrEventTooLarge  = errors.New("event too large")
)

// Limits bounds one request body.
type Limits struct {
	MaxRecords    int // records per body; 0 means the default (2000)
	MaxEventBytes int // bytes per record; 0 means the default (1 MiB)
}

// DefaultLimits returns the public limits of the import API: 2000 records per
// request and 1 MB per event.
func DefaultLimits() Limits { return Limits{MaxRecords: 2000, MaxEventBytes: 1 << 20} }

func (l Limits) orDefault() Limits {
	def := DefaultLimits()
	if l.MaxRecords <= 0 {
		l.MaxRecords = def.MaxRecords
	}
	if l.MaxEventBytes <= 0 {
		l.MaxEventBytes = def.MaxEventBytes
	}
	return l
}

// Split frames a body into the raw bytes of each record without parsing them:
// a JSON array of records, a single JSON object, or NDJSON (one record per
// line; blank lines skipped; CRLF accepted).
//
// With ndjson=true the body is split on newlines, so one broken line fails
// only that record later in Decode. Otherwise a body whose first non-space byte
// is '[' is an array, and anything else is a sequence of whitespace-separated
// objects, which covers NDJSON as well as one pretty-printed object.
//
// Framing tracks strings, escapes and nesting, so brackets inside strings are
// harmless; it does not validate the records themselves (Decode does, per
// record). A truncated array or garbage between elements is ErrMalformed. An
// empty body or an empty array yields no records and no error. The records are
// appended to dst and alias body.
func Split(body []byte, ndjson bool, lim Limits, dst [][]byte) ([][]byte, error) {
	lim = lim.orDefault()
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")) // some Windows clients send a BOM
	f := framer{b: body, lim: lim, dst: dst, base: len(dst)}
	var err error
	switch i := jsonscan.SkipSpace(body, 0); {
	case ndjson:
		err = f.lines()
	case i < len(body) && body[i] == '[':
		err = f.array(i + 1)
	default:
		err = f.values(i)
	}
	return f.dst, err
}

type framer struct {
	b    []byte
	lim  Limits
	dst  [][]byte
	base int // len(dst) on entry: only records of this body count toward the limit
}

// more is called when another record starts: the count limit fails the body
// before that record is even scanned.
func (f *framer) more() error {
	if len(f.dst)-f.base >= f.lim.MaxRecords {
		return fmt.Errorf("%w: the body holds more than %d records", ErrTooManyRecords, f.lim.MaxRecords)
	}
	return nil
}

// add appends one record after checking its size.
func (f *framer) add(start, end int) error {
	n := len(f.dst) - f.base
	if end-start > f.lim.MaxEventBytes {
		return fmt.Errorf("%w: record %d (at byte %d) is %d bytes; the limit is %d",
			ErrEventTooLarge, n, start, end-start, f.lim.MaxEventBytes)
	}
	f.dst = append(f.dst, f.b[start:end:end])
	return nil
}

func (f *framer) array(i int) error {
	b := f.b
	i = jsonscan.SkipSpace(b, i)
	if i < len(b) && b[i] == ']' {
		return f.end(i + 1)
	}
	for {
		if err := f.more(); err != nil {
			return err
		}
		end, err := valueEnd(b, i)
		if err != nil {
			return err
		}
		if err := f.add(i, end); err != nil {
			return err
		}
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) {
			return fmt.Errorf("%w: the array is truncated (no closing ']')", ErrMalformed)
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case ']':
			return f.end(i + 1)
		default:
			return fmt.Errorf("%w: at byte %d: expected ',' or ']' after an array element, found %q", ErrMalformed, i, b[i])
		}
	}
}

// end checks that only whitespace follows the closing bracket.
func (f *framer) end(i int) error {
	if i = jsonscan.SkipSpace(f.b, i); i < len(f.b) {
		return fmt.Errorf("%w: at byte %d: unexpected data after the closing ']'", ErrMalformed, i)
	}
	return nil
}

// values frames whitespace-separated objects (NDJSON or a single object).
func (f *framer) values(i int) error {
	b := f.b
	for i = jsonscan.SkipSpace(b, i); i < len(b); i = jsonscan.SkipSpace(b, i) {
		if b[i] != '{' && b[i] != '[' {
			return fmt.Errorf("%w: at byte %d: expected a JSON object, found %q", ErrMalformed, i, b[i])
		}
		if err := f.more(); err != nil {
			return err
		}
		end, err := valueEnd(b, i)
		if err != nil {
			return err
		}
		if err := f.add(i, end); err != nil {
			return err
		}
		i = end
	}
	return nil
}

// lines frames NDJSON strictly by line: a raw newline cannot occur inside a
// valid JSON record, and line framing confines a broken record to its line.
func (f *framer) lines() error {
	b := f.b
	for i := 0; i < len(b); {
		end := len(b)
		next := len(b)
		if k := bytes.IndexByte(b[i:], '\n'); k >= 0 {
			end, next = i+k, i+k+1
		}
		s := jsonscan.SkipSpace(b[:end], i)
		e := end
		for e > s && jsonscan.IsSpace(b[e-1]) {
			e--
		}
		if e > s {
			if err := f.more(); err != nil {
				return err
			}
			if err := f.add(s, e); err != nil {
				return err
			}
		}
		i = next
	}
	return nil
}

// valueEnd returns the end of the JSON value starting at b[i]. Containers are
// matched by depth only; mismatched bracket kinds are left for Decode to
// report as invalid JSON for that one record.
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: the body is truncated at byte %d", ErrMalformed, i)
	}
	switch b[i] {
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			case '"':
				q, ok := stringEnd(b, j+1)
				if !ok {
					return 0, fmt.Errorf("%w: unterminated string starting at byte %d", ErrMalformed, j)
				}
				j = q
			}
		}
		return 0, fmt.Errorf("%w: the record starting at byte %d is truncated", ErrMalformed, i)
	case '"':
		q, ok := stringEnd(b, i+1)
		if !ok {
			return 0, fmt.Errorf("%w: unterminated string starting at byte %d", ErrMalformed, i)
		}
		return q + 1, nil
	case '}', ']', ',', ':':
		return 0, fmt.Errorf("%w: at byte %d: unexpected %q", ErrMalformed, i, b[i])
	}
	// A scalar (number, literal or junk): up to the next delimiter. Decode
	// reports it as a record that is not an object.
	j := i
	for j < len(b) && !jsonscan.IsSpace(b[j]) && b[j] != ',' && b[j] != ']' && b[j] != '}' {
		j++
	}
	return j, nil
}

// stringEnd returns the index of the closing quote of a string whose content
// starts at i. It jumps between quotes with IndexByte and counts the
// backslashes before each one, which is much faster than a byte loop.
func stringEnd(b []byte, i int) (int, bool) {
	for {
		k := bytes.IndexByte(b[i:], '"')
		if k < 0 {
			return 0, false
		}
		q := i + k
		n := 0
		for p := q - 1; p >= 0 && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q, true
		}
		i = q + 1
	}
}
