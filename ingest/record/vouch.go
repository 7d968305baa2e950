package record

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// An encoder that writes records for the one-pass path can check most of
// a record's rules while it writes it, more cheaply than this package can
// scan the record again: it knows which of its values are numbers, which
// strings it copied verbatim (no escape, so no quote, backslash or control
// byte, and valid UTF-8) and how long they were, and how many properties
// it wrote. Such a record is vouched for (Options.Vouched, Vouch) and the
// one-pass path skips what was vouched for: the scan of the properties, or
// of the head too (it then only checks the punctuation around the fields
// it takes). Values the encoder cannot judge cheaply it checks with
// CleanValue or CleanMembers, the one-pass path's own rules.
//
// Encoders' tests hold every vouch to CheckVouch and decode each record
// both ways, requiring the same events and the same records taking the
// one-pass path.

// Vouch is an encoder's word about one record it wrote in the canonical
// shape. The zero value vouches for nothing.
type Vouch struct {
	// Rest: the properties after $insert_id are Members members, each
	// passing the one-pass path's rules (compact JSON; strings of at most
	// MaxCleanString bytes, no escape or control byte, valid UTF-8;
	// containers within the depth and size limits), their names unique
	// and none of time, distinct_id, $insert_id; a $user_id and a
	// $device_id, if written, come first and in that order.
	Rest    bool
	Members int16
	// Head: the event name, distinct_id and $insert_id are clean strings
	// of NameLen, DidLen and IidLen bytes, the insert id passes
	// ValidInsertID, and time is TimeMs written as TimeLen bytes, at least
	// MinHeadTimeMs (smaller integers read as seconds).
	Head            bool
	TimeLen, IidLen uint8
	NameLen, DidLen uint16
	TimeMs          int64
}

// MinHeadTimeMs is the smallest time a vouched head may hold: below it the
// one-pass path reads an integer time as seconds, not milliseconds.
const MinHeadTimeMs = secondsBelow

// MaxCleanString is the longest string, in bytes, the one-pass path takes.
const MaxCleanString = maxRunes

// MaxCleanMembers is the most members a record may have in all (its
// properties, the common ones and time, distinct_id, $insert_id), and the
// most items of one object or array.
const MaxCleanMembers = maxMembers

// Verbatim reports whether a string of k bytes that an encoder wrote as n
// bytes of JSON (quotes included) is one the one-pass path takes as it is.
// Escaping only lengthens a string (a quote, backslash, control byte,
// invalid UTF-8 byte, U+2028 or U+2029 all become longer escapes), so
// n == k+2 means it was copied verbatim and holds none of them.
func Verbatim(k, n int) bool { return k <= maxRunes && n == k+2 }

// CleanNumber reports whether b is exactly one JSON number within the
// range the one-pass path takes (an int64 integer, a finite float64).
func CleanNumber(b []byte) bool {
	j, big, err := number(b, 0)
	return err == nil && !big && j == len(b)
}

// CleanValue reports whether b is exactly one compact JSON value that the
// one-pass path takes as a top-level property's value.
func CleanValue(b []byte) bool {
	s := canonScan{b: b}
	j, ok := s.value(0, 0)
	return ok && j == len(b) && (!s.hi || utf8.Valid(b))
}

// CleanMembers reports how many members b holds and whether the one-pass
// path takes them as top-level properties: b is `"k":v` pairs, each
// preceded by a comma except perhaps the first. Names are not checked for
// duplicates.
func CleanMembers(b []byte) (int, bool) {
	s := canonScan{b: b}
	n, i := 0, 0
	for {
		k := i + 2 // after `,"`
		switch {
		case n == 0 && len(b) > 0 && b[0] == '"':
			k = 1
		case i+1 >= len(b) || b[i] != ',' || b[i+1] != '"':
			return n, i == len(b) && (!s.hi || utf8.Valid(b))
		}
		_, j, ok := s.str(k)
		if !ok || j >= len(b) || b[j] != ':' {
			return n, false
		}
		n++
		if i, ok = s.value(j+1, 0); !ok {
			return n, false
		}
	}
}

// vouchedHead reads the head of a record whose encoder vouched for it
// (Vouch.Head): the punctuation around the fields is all it checks.
func vouchedHead(rec []byte, v *Vouch) (h head, ok bool) {
	const (
		afterName = `","properties":{"time":`
		beforeDid = `,"distinct_id":"`
		beforeIid = `","$insert_id":"`
	)
	if v.TimeMs < MinHeadTimeMs {
		return h, false
	}
	i := len(canonHead) + int(v.NameLen)
	end := i + len(afterName) + int(v.TimeLen) + len(beforeDid) + int(v.DidLen) + len(beforeIid) + int(v.IidLen) + 1
	if end > len(rec) || string(rec[i:i+len(afterName)]) != afterName {
		return h, false
	}
	h.name = b2s(rec[len(canonHead):i])
	i += len(afterName) + int(v.TimeLen)
	if string(rec[i:i+len(beforeDid)]) != beforeDid {
		return h, false
	}
	i += len(beforeDid)
	h.did = b2s(rec[i : i+int(v.DidLen)])
	i += int(v.DidLen)
	if string(rec[i:i+len(beforeIid)]) != beforeIid {
		return h, false
	}
	i += len(beforeIid)
	h.iid = b2s(rec[i : i+int(v.IidLen)])
	i += int(v.IidLen)
	if rec[i] != '"' {
		return h, false
	}
	h.ms, h.rest, h.iidValid = v.TimeMs, i+1, true
	return h, true
}

// CheckVouch reports how v misstates rec (nil when it holds), reading rec
// in full: encoders' tests hold their vouching to it. A vouch claims
// nothing about a record the one-pass path cannot take anyway (another
// shape, a head it cannot read).
func CheckVouch(rec []byte, v Vouch) error {
	if !v.Head && !v.Rest {
		return nil
	}
	s := canonScan{b: rec}
	if len(rec) < len(canonHead) || string(rec[:len(canonHead)]) != canonHead {
		return nil // the one-pass path does not take it, whatever the vouch
	}
	h, ok := s.head()
	if v.Head {
		switch {
		case !ok:
			return errors.New("head vouched for, but not clean")
		case len(h.name) != int(v.NameLen) || len(h.did) != int(v.DidLen) || len(h.iid) != int(v.IidLen):
			return fmt.Errorf("head lengths %d/%d/%d, vouched %d/%d/%d", len(h.name), len(h.did), len(h.iid), v.NameLen, v.DidLen, v.IidLen)
		case h.time != strconv.FormatInt(v.TimeMs, 10) || len(h.time) != int(v.TimeLen) || h.ms != v.TimeMs:
			return fmt.Errorf("time %s, vouched %d (%d bytes)", h.time, v.TimeMs, v.TimeLen)
		case !ValidInsertID(h.iid):
			return fmt.Errorf("insert id %q vouched for", h.iid)
		case s.hi && !utf8.ValidString(h.name+h.did+h.iid):
			return errors.New("head vouched for, but not UTF-8")
		}
	}
	if !v.Rest || !ok {
		return nil // a head the one-pass path cannot read sends the record to the general path
	}
	if len(rec)-h.rest < 2 || string(rec[len(rec)-2:]) != "}}" {
		return errors.New("rest vouched for, record not closed by }}")
	}
	n, ok := CleanMembers(rec[h.rest : len(rec)-2])
	if !ok || n != int(v.Members) {
		return fmt.Errorf("rest: %d members, clean %v; vouched %d", n, ok, v.Members)
	}
	return nil
}

// leadingIDs reads the $user_id and $device_id a vouched record carries
// first among its other properties (at i), as idValue would.
func (s *canonScan) leadingIDs(i int) bool {
	for _, k := range [...]string{"$user_id", "$device_id"} {
		j, ok := s.next(i, k)
		if !ok {
			continue
		}
		v, end, ok := s.strValue(j)
		if !ok {
			return false // not a plain string: the general path reads it
		}
		if k == "$user_id" {
			s.user, s.hasUser = v, true
		} else {
			s.dev, s.hasDev = v, true
		}
		i = end
	}
	return true
}
