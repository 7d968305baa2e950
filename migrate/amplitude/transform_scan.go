package amplitude

import (
	"strconv"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// nTop is the number of mapped top-level fields (transformer.top).
const nTop = len(renamed) + len(passedThrough)

// The fields the identity, time and dedup key come from, and the two
// spread ones: their slots in transformer.fields, after the mapped ones,
// so one lookup classifies each top-level name.
const (
	sEventType = nTop + iota
	sUserID
	sDeviceID
	sEventTime
	sAmplitudeID
	sUUID
	sEventProps
	sUserProps
)

var coreNames = [...]string{"event_type", "user_id", "device_id", "event_time", "amplitude_id", "uuid", "event_properties", "user_properties"}

// initScan fills the fast path's name table: the mapped names and the
// core ones.
func (t *transformer) initScan() {
	t.fields = t.slots
	for i, name := range coreNames {
		t.fields.add(name, nTop+i)
	}
}

// scanned is what the fast path keeps of a line's top level: the values
// the tree path's core and top hold, as spans. A value is present when its
// span ends past 0 (no value starts a line).
type scanned struct {
	eventType, userID, deviceID, eventTime, amplitudeID, uuid val
	eventProps, userProps                                     props
	top                                                       [nTop]val
}

// props is the last event_properties or user_properties of a line: the
// value, and its members in lineScanner.members when it is an object.
type props struct {
	v        val
	from, to int
}

// appendRecordScan is appendRecord's fast path; ok is false, with dst and
// side unchanged, for a line it leaves to the tree path.
func (t *transformer) appendRecordScan(dst, side, line []byte, ev *amplitudeEvent) (_, _ []byte, ok bool) {
	c := &t.scan
	*c = scanned{}
	if !t.scanTop(line, c) || c.eventTime.f != kString {
		return dst, side, false
	}
	ms, ok := parseEventTime(strText(line, c.eventTime))
	if !ok {
		return dst, side, false // the tree path words the error
	}
	ev.user.start = len(side)
	side = t.appendIDScan(side, line, c.userID)
	ev.user.end = len(side)
	ev.props.start = len(side)
	if c.userProps.v.f.kind() == kObject {
		side = appendCompact(side, line, c.userProps.v)
	}
	ev.props.end = len(side)
	user := ev.user.of(side)
	device := t.appendIDScan(t.dev[:0], line, c.deviceID)
	t.dev = device

	t.startClaims()
	vs := &t.vouch
	vs.reset()
	h := &vs.v
	dst = append(dst, '{')
	if c.eventType.end > 0 {
		dst = append(dst, `"event":`...)
		n := len(dst)
		dst = appendCompact(dst, line, c.eventType)
		h.NameLen = uint16(len(dst) - n - 2)
		h.Head = cleanString(dst[n:], c.eventType.f)
		dst = append(dst, ',')
	}
	dst = append(dst, `"properties":{"time":`...)
	n := len(dst)
	dst = strconv.AppendInt(dst, ms, 10)
	h.TimeMs, h.TimeLen = ms, uint8(len(dst)-n)
	h.Head = h.Head && ms >= record.MinHeadTimeMs
	dst = append(dst, `,"distinct_id":`...)
	n = len(dst)
	did := user
	switch {
	case len(user) > 0:
		dst = appendStringToken(dst, line, c.userID, user)
	case len(device) > 0:
		t.key = append(append(t.key[:0], "$device:"...), device...)
		dst = jsonw.String(dst, b2s(t.key))
		did = t.key
	default: // neither: Mixpanel's reference transform falls back to amplitude_id
		t.key = t.appendIDScan(t.key[:0], line, c.amplitudeID)
		dst = jsonw.String(dst, b2s(t.key))
		did = t.key
	}
	h.DidLen = uint16(len(did))
	h.Head = h.Head && record.Verbatim(len(did), len(dst)-n)
	iid := t.insertIDScan(line, c, user)
	h.IidLen = uint8(len(iid))
	h.Head = h.Head && iid != record.NilUUID // hashed ids are valid but for this placeholder
	n = len(dst)
	dst = appendIDs(dst, iid, user, device)
	vs.ids(len(dst)-n, len(iid), len(user), len(device))
	for i, v := range c.top {
		if v.end > 0 && t.claimTop(i) {
			dst = append(dst, t.prefixes[i]...)
			n := len(dst)
			dst = t.appendUnescaped(dst, line, v)
			vs.members++
			vs.value(dst[n:], v)
		}
	}
	dst = append(dst, `,"$source":"`+Source+`","$import":true`...)
	vs.members += 2
	dst = t.spreadScan(dst, line, c.eventProps)
	dst = t.spreadScan(dst, line, c.userProps)
	return append(dst, "}}"...), side, true
}

// scanTop reads the line's top-level object into c, keeping values as the
// tree path's Visit does: the last of a repeated core field, the first
// non-null of a mapped one.
func (t *transformer) scanTop(line []byte, c *scanned) bool {
	s := &t.sc
	s.b, s.members = line, s.members[:0]
	i, _ := s.skipWS(0)
	if i >= len(line) || line[i] != '{' {
		return false
	}
	i, _ = s.skipWS(i + 1)
	if i < len(line) && line[i] == '}' {
		i, _ = s.skipWS(i + 1)
		return i == len(line)
	}
	for k := 0; ; k++ {
		kend, j, slot := t.shape.match(line, i, k)
		if j < 0 {
			var kf vflags
			kend, kf, j = s.key(i)
			if j < 0 || kf&fEsc != 0 { // the tree path unescapes top-level names
				return false
			}
			slot = t.fields.lookup(line[i+1 : kend-1])
			t.shape.learn(k, line[i:kend], slot)
		} else {
			j, _ = s.skipWS(j)
		}
		from := len(s.members)
		next, vf := s.value(j, 1, slot == sEventProps || slot == sUserProps)
		if next < 0 {
			return false
		}
		v := val{span{j, next}, vf}
		switch {
		case slot < 0:
		case slot < nTop:
			if c.top[slot].end == 0 && vf.kind() != kNull {
				c.top[slot] = v
			}
		case slot == sEventType:
			c.eventType = v
		case slot == sUserID:
			c.userID = v
		case slot == sDeviceID:
			c.deviceID = v
		case slot == sEventTime:
			c.eventTime = v
		case slot == sAmplitudeID:
			c.amplitudeID = v
		case slot == sUUID:
			c.uuid = v
		case slot == sEventProps:
			c.eventProps = props{v, from, len(s.members)}
		case slot == sUserProps:
			c.userProps = props{v, from, len(s.members)}
		}
		i, _ = s.skipWS(next)
		if i >= len(line) {
			return false
		}
		switch line[i] {
		case ',':
			i, _ = s.skipWS(i + 1)
		case '}':
			i, _ = s.skipWS(i + 1)
			return i == len(line)
		default:
			return false
		}
	}
}

// spreadScan appends the members of event or user properties, as spread.
func (t *transformer) spreadScan(dst, line []byte, p props) []byte {
	if p.v.f.kind() != kObject {
		return dst
	}
	for _, m := range t.sc.members[p.from:p.to] {
		name := t.text(line, m.key)
		if !t.claim(name) {
			continue
		}
		dst = append(dst, ',')
		n := len(dst)
		dst = appendStringToken(dst, line, m.key, name)
		t.vouch.text(len(name), len(dst)-n)
		dst = append(dst, ':')
		n = len(dst)
		dst = appendCompact(dst, line, m.val)
		t.vouch.value(dst[n:], m.val)
	}
	return dst
}

// insertIDScan is insertID over scanned values.
func (t *transformer) insertIDScan(line []byte, c *scanned, user []byte) string {
	k := append(t.key[:0], "[amp] "...)
	k = t.appendTextScan(k, line, c.eventType)
	k = append(append(k, 0x1f), user...)
	k = t.appendTextScan(append(k, 0x1f), line, c.eventTime)
	k = t.appendIDScan(append(k, 0x1f), line, c.amplitudeID)
	k = t.appendIDScan(append(k, 0x1f), line, c.uuid)
	return t.hashID(k)
}

// appendIDScan is appendID: a string's text, a number's bytes, else
// nothing.
func (t *transformer) appendIDScan(dst, line []byte, v val) []byte {
	switch v.f.kind() {
	case kString:
		if v.end > 0 {
			return append(dst, t.text(line, v)...)
		}
	case kNumber:
		return append(dst, v.of(line)...)
	}
	return dst
}

// appendTextScan is appendText: a string's text, any other value's JSON;
// nothing when absent.
func (t *transformer) appendTextScan(dst, line []byte, v val) []byte {
	switch {
	case v.end == 0:
		return dst
	case v.f.kind() == kString:
		return append(dst, t.text(line, v)...)
	}
	return appendCompact(dst, line, v)
}

// text returns a string's unescaped text, valid until the next call.
func (t *transformer) text(line []byte, v val) []byte {
	if v.f&fEsc == 0 {
		return strText(line, v)
	}
	return t.parseString(line, v).GetStringBytes()
}

// appendUnescaped appends a mapped field's value as the tree path writes
// it once it has asked for the value's type: a string unescaped and
// quoted again (by fastjson, so alike to the byte), anything else as is.
func (t *transformer) appendUnescaped(dst, line []byte, v val) []byte {
	if v.f.kind() == kString && v.f&(fEsc|fCtl) != 0 {
		pv := t.parseString(line, v)
		pv.Type()
		return pv.MarshalTo(dst)
	}
	return appendCompact(dst, line, v)
}

// appendStringToken appends text, the text of v, as a JSON string. A
// string token without escapes, control bytes or bytes ≥ 0x80 is
// already what jsonw.String would write, and is copied as it is.
func appendStringToken(dst, line []byte, v val, text []byte) []byte {
	if v.f.kind() == kString && v.f&(fEsc|fCtl|fHigh) == 0 {
		return append(dst, v.of(line)...)
	}
	return jsonw.String(dst, b2s(text))
}

// strText is a string's bytes between its quotes.
func strText(line []byte, v val) []byte { return line[v.start+1 : v.end-1] }

// keyShape is the top-level keys of the last line the fast path read, by
// position. The lines of one export repeat their keys in one order, so a
// key is mostly found by comparing its bytes with last line's key at the
// same position, instead of scanning it as a string and looking it up:
// identical bytes are the same string token with the same slot. Only keys
// without escapes are kept (others take the tree path anyway).
type keyShape struct {
	keys  [][]byte // `"name"`, quotes included
	slots []int
}

// match reports the key at line[i] if it is the one learned for position
// k and a colon follows it at once: the key's end, the index after the
// colon and the key's slot; j < 0 when it is not.
func (ks *keyShape) match(line []byte, i, k int) (end, j, slot int) {
	if k >= len(ks.keys) {
		return 0, -1, 0
	}
	key := ks.keys[k]
	end = i + len(key)
	if end >= len(line) || line[end] != ':' || string(line[i:end]) != string(key) {
		return 0, -1, 0
	}
	return end, end + 1, ks.slots[k]
}

// learn keeps key as position k's.
func (ks *keyShape) learn(k int, key []byte, slot int) {
	if k > len(ks.keys) || k >= maxShapeKeys {
		return
	}
	if k == len(ks.keys) {
		ks.keys, ks.slots = append(ks.keys, nil), append(ks.slots, 0)
	}
	ks.keys[k], ks.slots[k] = append(ks.keys[k][:0], key...), slot
}

// maxShapeKeys bounds what a line with very many keys makes a chunk keep.
const maxShapeKeys = 256
