package mapping

import "github.com/tributary-dev/tributary/ingest/record"

// The mapper vouches for each event it writes (record.Vouch): the head's
// field lengths and time, and the properties' count, noting any value the
// validator's one-pass path would not take, so the validator need not
// scan the record again (that scan was about a tenth of a sync's CPU;
// event1 and appendProps call these helpers as they write). A string copied
// verbatim (the output is the input plus two quotes) has no quote,
// backslash or control byte and is valid UTF-8; numbers and booleans are
// written clean; anything else written (dates, decimals, nested values,
// MAP and JSON columns) is checked with the validator's own rules.

// writesClean reports the kinds whose appendValue output is always clean:
// numbers formatted by strconv or appendInt, literals, and dates and
// timestamps quoted as short ASCII text. Decimals are not among them (a
// negative scale can write 000), nor unsigned integers (one past int64's
// range is a number the validator refuses), nor anything holding strings.
func writesClean(k vkind) bool {
	switch k {
	case kInt, kFloat, kBool, kTimestamp, kDate32, kDate64:
		return true
	}
	return false
}

// planVouch decides once per schema whether records can be vouched for:
// property names must be distinct and clean, and so must the run tags
// when each record carries them.
func (m *Mapper) planVouch() {
	m.vouch = m.uniqueNames
	if m.staticEvent != nil {
		m.staticClean = cleanText(m.opt.Import.Event(), len(m.staticEvent))
	}
	for _, l := range m.props {
		if !l.dyn && !cleanKey(l.key) {
			m.vouch = false
		}
	}
	if len(m.tags) > 2 { // more than the closing braces: the tags are not common
		n, ok := record.CleanMembers(m.tags[:len(m.tags)-2])
		m.tagMembers, m.vouch = n, m.vouch && ok
	}
}

// cleanKey reports whether key, `,"name":`, holds a name the one-pass
// path takes.
func cleanKey(key []byte) bool {
	n, ok := record.CleanMembers(append(key[:len(key):len(key)], '0'))
	return ok && n == 1
}

// vouchString notes whether out, the JSON text written for row i's string
// in v, is that string copied verbatim and short enough.
func (m *Mapper) vouchString(out []byte, v *venc, i int) {
	m.clean = m.clean && record.Verbatim(int(v.offs[i+1]-v.offs[i]), len(out))
}

// cleanText reports whether s, written as n bytes of JSON, was copied
// verbatim and is short enough (record.Verbatim).
func cleanText(s string, n int) bool { return record.Verbatim(len(s), n) }

// vouchMember counts a member and notes whether text (a property name, or
// the value of $user_id or $device_id) written as n bytes of JSON is clean.
func (m *Mapper) vouchMember(text string, n int) {
	m.members++
	m.clean = m.clean && cleanText(text, n)
}

// vouchText notes whether s, written as n bytes of JSON, is clean.
func (m *Mapper) vouchText(s string, n int) { m.clean = m.clean && cleanText(s, n) }

// vouchValue checks a value the JSON flattener copied: literals are
// clean; numbers (strict JSON there) must be in the validator's range;
// strings and containers are checked by the validator's rules.
func (m *Mapper) vouchValue(out []byte) {
	if !m.clean || len(out) == 0 {
		return
	}
	switch out[0] {
	case '"', '[', '{':
		m.clean = record.CleanValue(out)
	case 't', 'f', 'n':
	default:
		m.clean = record.CleanNumber(out)
	}
}
