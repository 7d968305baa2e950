package record

import "unicode/utf8"

// An encoder that writes records for the one-pass path can check most of
// a record's rules while it writes it, more cheaply than this package can
// scan the record again: it knows which of its values are numbers, which
// strings it copied verbatim (no escape, so no quote, backslash or control
// byte, and valid UTF-8) and how long they were, and how many properties
// it wrote. Such a record is vouched for (Options.Vouched) and the one-pass
// path reads only its head: event name, time, distinct_id, $insert_id and
// the leading $user_id / $device_id. Values the encoder cannot judge
// cheaply it checks with CleanValue or CleanMembers, the one-pass path's
// own rules.
//
// The warehouse mapper's tests run every record both ways and require the
// same events and the same set of records taking the one-pass path.

// MaxCleanString is the longest string, in bytes, the one-pass path takes.
const MaxCleanString = maxRunes

// MaxCleanMembers is the most members a record may have in all (its
// properties, the common ones and time, distinct_id, $insert_id), and the
// most items of one object or array.
const MaxCleanMembers = maxMembers

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
