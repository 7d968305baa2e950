package amplitude

import (
	"hash/maphash"
	"strconv"
	"unsafe"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Source is the $source property of every migrated event.
const Source = "amplitude"

// Amplitude's standard fields and the properties they become: the map of
// Mixpanel's own reference transforms (public-interface-facts §5.2). The
// export names some fields differently from Amplitude's ingestion API
// (version_name, device_carrier); both spellings are mapped.
var renamed = [...]struct{ from, to string }{
	{"ip_address", "ip"},
	{"city", "$city"},
	{"region", "$region"},
	{"country", "mp_country_code"},
	{"app_version", "$app_version_string"},
	{"version_name", "$app_version_string"},
	{"os_name", "$os"},
	{"os_version", "$os_version"},
	{"device_brand", "$brand"},
	{"device_manufacturer", "$manufacturer"},
	{"device_model", "$model"},
	{"carrier", "$carrier"},
	{"device_carrier", "$carrier"},
}

// passedThrough keep their Amplitude name.
var passedThrough = [...]string{
	"platform", "dma", "language", "price", "quantity", "revenue", "productId", "revenueType",
	"location_lat", "location_lng", "idfa", "idfv", "adid", "android_id", "event_id", "session_id", "plan",
}

// reserved are written by the transform itself, or steer identity, so an
// event or user property of that name is dropped rather than allowed to
// change the event's time, dedup key or user.
var reserved = [...]string{"time", "distinct_id", "$distinct_id", "$insert_id", "$user_id", "$device_id", "$source", "$import"}

// fieldError is an exported line the transform cannot turn into a record.
type fieldError struct{ field, msg string }

// amplitudeEvent is what the pipeline keeps of a line besides its record:
// spans of the side buffer given to appendRecord.
type amplitudeEvent struct {
	user  span // user_id as text; empty without one
	props span // user_properties as a JSON object; empty without
}

type span struct{ start, end int }

func (s span) of(b []byte) []byte { return b[s.start:s.end] }

// transformer turns export lines into /import records. It reuses its
// parser and buffers: one per goroutine.
type transformer struct {
	p     fastjson.Parser
	top   [len(renamed) + len(passedThrough)]*fastjson.Value
	slots fieldTable // top-level field name → index in top
	// The property names written to the current record (claim): a bit in
	// taken for the names the transform writes itself (fixed), a hash in
	// seen for the others.
	taken    uint64
	seen     nameSet
	fixed    fieldTable // reserved and target names → their bit in taken
	topBits  [len(renamed) + len(passedThrough)]uint64
	seed     maphash.Seed
	prefixes [len(renamed) + len(passedThrough)][]byte // ,"name":
	key, dev []byte
	iid      []byte // the last record's $insert_id

	// The fast path (transform_scan.go).
	fields fieldTable      // slots plus the core names (initScan)
	shape  keyShape        // the top-level keys of the last line
	vouch  vouchState      // of the record written last (vouch.go)
	sc     lineScanner     // its scanner
	scan   scanned         // and what it found
	sp     fastjson.Parser // parses the odd string the fast path must unescape
}

// reservedBits are the bits of the reserved names in transformer.taken:
// the first ones, taken from the start of every record.
const reservedBits = 1<<len(reserved) - 1

func newTransformer() *transformer {
	t := &transformer{seed: maphash.MakeSeed()}
	for i, name := range reserved {
		t.fixed.add(name, i)
	}
	bits := len(reserved)
	target := func(i int, from, to string) {
		t.slots.add(from, i)
		bit := t.fixed.lookup([]byte(to))
		if bit < 0 { // two fields may map to one name ($carrier)
			bit = bits
			bits++
			t.fixed.add(to, bit)
		}
		t.topBits[i] = 1 << bit
		t.prefixes[i] = append(jsonw.String([]byte{','}, to), ':')
	}
	for i, r := range renamed {
		target(i, r.from, r.to)
	}
	for i, name := range passedThrough {
		target(len(renamed)+i, name, name)
	}
	if bits > 64 {
		panic("amplitude: more fixed property names than bits in transformer.taken")
	}
	t.initScan()
	return t
}

// nameSet is a set of 64-bit name hashes: open addressing, emptied in O(1)
// by bumping a generation. A map of strings would allocate per property,
// and a 64-bit collision (which would drop one property) is far less
// likely than a disk error.
type nameSet struct {
	slots []nameSlot
	gen   uint32
	n     int
}

type nameSlot struct {
	h   uint64
	gen uint32
}

func (s *nameSet) reset() {
	s.gen++
	s.n = 0
	if s.gen == 0 { // wrapped: old stamps could look current
		clear(s.slots)
		s.gen = 1
	}
}

// add inserts h and reports whether it was absent.
func (s *nameSet) add(h uint64) bool {
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := len(s.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		e := &s.slots[i]
		if e.gen != s.gen {
			e.h, e.gen = h, s.gen
			s.n++
			return true
		}
		if e.h == h {
			return false
		}
	}
}

func (s *nameSet) grow() {
	old, gen := s.slots, s.gen
	s.slots = make([]nameSlot, max(64, 2*len(old)))
	s.n = 0
	for _, e := range old {
		if e.gen == gen {
			s.add(e.h)
		}
	}
}

// startClaims starts a record: only the reserved names are taken.
func (t *transformer) startClaims() {
	t.taken = reservedBits
	t.seen.reset()
}

// claimTop reports whether mapped field i's property name is still free
// in the current record and takes it.
func (t *transformer) claimTop(i int) bool { return t.take(t.topBits[i]) }

// take reports whether the fixed name of bit is still free and takes it.
func (t *transformer) take(bit uint64) bool {
	if t.taken&bit != 0 {
		return false
	}
	t.taken |= bit
	return true
}

// claim reports whether name is still free in the current record and
// takes it. A record's ~40 fixed names cost a bit each instead of a hash
// and a probe (BenchmarkTransformValidate: see docs/benchmarks.md).
func (t *transformer) claim(name []byte) bool {
	if bit := t.fixed.lookup(name); bit >= 0 {
		return t.take(1 << bit)
	}
	return t.seen.add(maphash.Bytes(t.seed, name))
}

// core are the fields the identity, time and dedup key come from.
type core struct {
	eventType, userID, deviceID, eventTime, amplitudeID, uuid *fastjson.Value
	eventProps, userProps                                     *fastjson.Value
}

// appendRecord appends the /import record of one exported event to dst
// (see appendRecordTree). It takes the one-pass fast path
// (appendRecordScan), and the tree path for the lines that one leaves.
//
// The user id and user properties go to side, for the profile pass.
func (t *transformer) appendRecord(dst, side, line []byte, ev *amplitudeEvent) ([]byte, []byte, *fieldError) {
	if dst, side, ok := t.appendRecordScan(dst, side, line, ev); ok {
		return dst, side, nil
	}
	t.vouch = vouchState{} // the tree path vouches for nothing
	return t.appendRecordTree(dst, side, line, ev)
}

// appendRecordTree appends the /import record of one exported event to dst
// through fastjson's parse tree:
//
//	{"event": event_type, "properties": {time, distinct_id, $insert_id,
//	 $user_id, $device_id, mapped standard fields, $source, $import,
//	 event_properties…, user_properties…}}
//
// Earlier names win: standard fields over event properties, event
// properties over user properties. Validation is left to the /import
// decoder, so a record may still be refused there (no event_type, say).
//
// The user id and user properties go to side, for the profile pass.
func (t *transformer) appendRecordTree(dst, side, line []byte, ev *amplitudeEvent) ([]byte, []byte, *fieldError) {
	v, err := t.p.ParseBytes(line)
	if err != nil {
		return dst, side, &fieldError{"", "invalid JSON: " + err.Error()}
	}
	obj, err := v.Object()
	if err != nil {
		return dst, side, &fieldError{"", "invalid event: must be a JSON object"}
	}
	var c core
	clear(t.top[:])
	obj.Visit(func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "event_type":
			c.eventType = v
		case "user_id":
			c.userID = v
		case "device_id":
			c.deviceID = v
		case "event_time":
			c.eventTime = v
		case "amplitude_id":
			c.amplitudeID = v
		case "uuid":
			c.uuid = v
		case "event_properties":
			c.eventProps = v
		case "user_properties":
			c.userProps = v
		default:
			if i := t.slots.lookup(k); i >= 0 && t.top[i] == nil && v.Type() != fastjson.TypeNull {
				t.top[i] = v
			}
		}
	})
	ms, ok := eventTimeMs(c.eventTime)
	if !ok {
		got := "nothing"
		if c.eventTime != nil {
			got = string(c.eventTime.MarshalTo(nil))
		}
		return dst, side, &fieldError{"event_time", "'event_time' is invalid: must be UTC 'YYYY-MM-DD HH:MM:SS[.ffffff]'; got " + truncateText(got, 64)}
	}
	ev.user.start = len(side)
	side = appendID(side, c.userID)
	ev.user.end = len(side)
	ev.props.start = len(side)
	if c.userProps != nil && c.userProps.Type() == fastjson.TypeObject {
		side = c.userProps.MarshalTo(side)
	}
	ev.props.end = len(side)
	user := ev.user.of(side)
	device := appendID(t.dev[:0], c.deviceID)
	t.dev = device

	t.startClaims()
	dst = append(dst, '{')
	if c.eventType != nil {
		dst = append(dst, `"event":`...)
		dst = c.eventType.MarshalTo(dst)
		dst = append(dst, ',')
	}
	dst = append(dst, `"properties":{"time":`...)
	dst = strconv.AppendInt(dst, ms, 10)
	dst = append(dst, `,"distinct_id":`...)
	switch {
	case len(user) > 0:
		dst = jsonw.String(dst, b2s(user))
	case len(device) > 0:
		dst = jsonw.String(dst, "$device:"+b2s(device))
	default: // neither: Mixpanel's reference transform falls back to amplitude_id
		dst = jsonw.String(dst, string(appendID(nil, c.amplitudeID)))
	}
	dst = appendIDs(dst, t.insertID(&c, user), user, device)
	for i, v := range t.top {
		if v != nil && t.claimTop(i) {
			dst = v.MarshalTo(append(dst, t.prefixes[i]...))
		}
	}
	dst = append(dst, `,"$source":"`+Source+`","$import":true`...)
	dst = t.spread(dst, c.eventProps)
	dst = t.spread(dst, c.userProps)
	return append(dst, "}}"...), side, nil
}

// appendIDs writes the record's $insert_id, then $user_id and $device_id
// when the event has them (both transform paths).
func appendIDs(dst []byte, iid string, user, device []byte) []byte {
	dst = append(dst, `,"$insert_id":"`...)
	dst = append(dst, iid...)
	dst = append(dst, '"')
	if len(user) > 0 {
		dst = append(dst, `,"$user_id":`...)
		dst = jsonw.String(dst, b2s(user))
	}
	if len(device) > 0 {
		dst = append(dst, `,"$device_id":`...)
		dst = jsonw.String(dst, b2s(device))
	}
	return dst
}

// spread appends the members of an object (event or user properties).
func (t *transformer) spread(dst []byte, v *fastjson.Value) []byte {
	if v == nil || v.Type() != fastjson.TypeObject {
		return dst
	}
	o, _ := v.Object()
	o.Visit(func(k []byte, v *fastjson.Value) {
		if !t.claim(k) {
			return
		}
		dst = append(dst, ',')
		dst = jsonw.String(dst, b2s(k))
		dst = append(dst, ':')
		dst = v.MarshalTo(dst)
	})
	return dst
}

// insertID derives the event's $insert_id (spec §2.5: Amplitude does not
// export one; build it from event type, user id, event time and the
// internal id). The input follows the public warehouse recipe
// ('[amp] ' + event_type + user_id + event_time + amplitude_id) with
// separators, plus the event's uuid so two events of one user at the same
// microsecond stay two. The '[' and ' ' make the text an invalid insert
// id, so NormalizeInsertID always hashes it to 36 bytes of UUID layout:
// the same event gets the same id in every run and process.
func (t *transformer) insertID(c *core, user []byte) string {
	k := append(t.key[:0], "[amp] "...)
	k = appendText(k, c.eventType)
	k = append(append(k, 0x1f), user...)
	k = appendText(append(k, 0x1f), c.eventTime)
	k = appendID(append(k, 0x1f), c.amplitudeID)
	k = appendID(append(k, 0x1f), c.uuid)
	return t.hashID(k)
}

// hashID keeps k, the insert id's input, as t.key and returns its
// normalised form, valid until the next record.
func (t *transformer) hashID(k []byte) string {
	t.key = k
	t.iid = mapping.AppendNormalizedInsertID(t.iid[:0], b2s(k))
	return b2s(t.iid)
}

// appendID appends an id as text: a string's bytes, a number's digits;
// nothing when absent, null or of another type.
func appendID(dst []byte, v *fastjson.Value) []byte {
	if v == nil {
		return dst
	}
	switch v.Type() {
	case fastjson.TypeString:
		return append(dst, v.GetStringBytes()...)
	case fastjson.TypeNumber:
		return v.MarshalTo(dst)
	}
	return dst
}

// appendText appends a string's bytes, or any other value as JSON.
func appendText(dst []byte, v *fastjson.Value) []byte {
	if v == nil {
		return dst
	}
	if v.Type() == fastjson.TypeString {
		return append(dst, v.GetStringBytes()...)
	}
	return v.MarshalTo(dst)
}

// parseString parses one string the fast path scanned, whose text needs
// fastjson's unescaping (the tree path's, so alike to the byte). It cannot
// fail: the scanner ends a string where fastjson does.
func (t *transformer) parseString(line []byte, v val) *fastjson.Value {
	pv, err := t.sp.ParseBytes(v.of(line))
	if err != nil {
		panic("amplitude: a scanned string does not parse: " + err.Error())
	}
	return pv
}

// b2s views bytes as a string without copying; the string must not
// outlive the next change to b.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// eventTimeMs parses Amplitude's event_time, "2021-12-09 00:45:29.430000"
// (UTC, no zone), to milliseconds, dropping digits below the millisecond as
// Mixpanel's reference transforms do. A 'T' separator and a trailing 'Z'
// are accepted too.
func eventTimeMs(v *fastjson.Value) (int64, bool) {
	if v == nil || v.Type() != fastjson.TypeString {
		return 0, false
	}
	return parseEventTime(v.GetStringBytes())
}

func parseEventTime(s []byte) (int64, bool) {
	if n := len(s); n > 0 && s[n-1] == 'Z' {
		s = s[:n-1]
	}
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	var f [6]int
	for i, at := range [6]int{0, 5, 8, 11, 14, 17} {
		w := 2
		if i == 0 {
			w = 4
		}
		n, ok := digits(s[at : at+w])
		if !ok {
			return 0, false
		}
		f[i] = n
	}
	ms := 0
	if rest := s[19:]; len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 10 {
			return 0, false
		}
		frac, ok := digits(rest[1:])
		if !ok {
			return 0, false
		}
		for range 10 - len(rest) { // scale to nanoseconds
			frac *= 10
		}
		ms = frac / 1e6
	}
	if f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return 0, false
	}
	if f[2] > daysIn(f[0], f[1]) { // 31 February
		return 0, false
	}
	// Arithmetic: time.Date took about 5 % of the fast path's time.
	days := daysFromCivil(f[0], f[1], f[2])
	return ((days*24+int64(f[3]))*60+int64(f[4]))*60000 + int64(f[5])*1000 + int64(ms), true
}

// daysFromCivil is the number of days from 1970-01-01 to a date of the
// proleptic Gregorian calendar, as time.Date counts them (H. Hinnant's
// days_from_civil).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400                  // [0, 399]
	doy := (153*((m+9)%12)+2)/5 + d - 1 // [0, 365], from 1 March
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(b) > 0
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
