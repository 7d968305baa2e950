package amplitude

import (
	"unicode/utf8"

	"github.com/tributary-dev/tributary/ingest/record"
)

// The fast path vouches for the records it writes (record.Vouch), as the
// warehouse mapper does, so the /import decoder's one-pass path need not
// scan them again (that scan was a third of transform + validation): it
// notes the head's field lengths and time, counts the properties and
// checks each value as it copies it. A string token is judged by the
// flags the line scanner set while reading it (no escape or control byte;
// valid UTF-8 when it holds high bytes) and its length; numbers, copied
// with fastjson's looser grammar, by record.CleanNumber; containers by
// record.CleanValue; literals are clean. A string the transform unescapes
// and quotes again is not vouched for.

// vouchState is the vouch of the record being written.
type vouchState struct {
	v       record.Vouch
	clean   bool // the properties so far are clean
	members int
}

func (s *vouchState) reset() { *s = vouchState{clean: true} }

// text notes a member whose name of k bytes was written as n bytes of
// JSON (record.Verbatim).
func (s *vouchState) text(k, n int) {
	s.members++
	s.clean = s.clean && record.Verbatim(k, n)
}

// ids notes what appendIDs wrote (n bytes): the insert id, and the user
// and device ids when not empty, each verbatim when n is their sum.
func (s *vouchState) ids(n, iid, user, device int) {
	want := len(`,"$insert_id":"`) + iid + 1
	for _, id := range [...]struct{ key, k int }{{len(`,"$user_id":`), user}, {len(`,"$device_id":`), device}} {
		if id.k > 0 {
			s.members++
			want += id.key + id.k + 2
			s.clean = s.clean && id.k <= record.MaxCleanString
		}
	}
	s.clean = s.clean && n == want
}

// value notes a value copied from the line (out) that scanned as v.
func (s *vouchState) value(out []byte, v val) {
	if !s.clean {
		return
	}
	switch v.f.kind() {
	case kString:
		s.clean = cleanString(out, v.f)
	case kBool, kNull:
	case kNumber: // copied as fastjson reads them, looser than JSON
		s.clean = record.CleanNumber(out)
	default: // objects, arrays
		s.clean = record.CleanValue(out)
	}
}

// cleanString reports whether out, a string token the scanner flagged f
// and the transform copied, is one the one-pass path takes.
func cleanString(out []byte, f vflags) bool {
	return f.kind() == kString && f&(fEsc|fCtl|fWS) == 0 && len(out)-2 <= record.MaxCleanString &&
		(f&fHigh == 0 || utf8.Valid(out))
}

// done returns the record's vouch.
func (s *vouchState) done() record.Vouch {
	v := s.v
	if s.clean && s.members < record.MaxCleanMembers {
		v.Rest, v.Members = true, int16(s.members)
	}
	return v
}
