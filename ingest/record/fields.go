package record

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

const (
	minTimeMs    = 31_536_000_000 // 1971-01-01T00:00:00Z: earlier times fail
	secondsBelow = 10_000_000_000 // a time below this is seconds, otherwise ms
	maxAheadMs   = 3_600_000      // at most one hour after the server clock
	maxInsertID  = 36             // bytes of [A-Za-z0-9-]

	// msgTime is the documented message for a time that is missing or not
	// a number; a number out of range gets a message naming the range.
	msgTime       = "'properties.time' is invalid: must be specified as seconds since epoch"
	msgTimeBefore = "'properties.time' is invalid: before 1971-01-01; send seconds or milliseconds since epoch"
	msgDistinct   = "'properties.distinct_id' is invalid: must be a string"
	msgInsertID   = "'properties.$insert_id' is invalid: must be 1 to 36 characters of A-Z, a-z, 0-9 or '-', and not a placeholder value"
)

// NilUUID is the one placeholder of UUID shape: an encoder that derives
// 36-byte hashed insert ids (and vouches for them) must still refuse it.
const NilUUID = "00000000-0000-0000-0000-000000000000"

// placeholders are the values refused as distinct_id or $insert_id: SDK bugs
// send them for every user, and accepting them would merge all those users.
var placeholders = [...]string{
	NilUUID, "anon", "anonymous", "nil", "none",
	"null", "n/a", "na", "undefined", "unknown", "<nil>", "0", "-1", "true",
	"false", "[]", "{}",
}

// placeholderLens has bit n set when a placeholder is n bytes long.
var placeholderLens = func() (m uint64) {
	for _, p := range placeholders {
		m |= 1 << len(p)
	}
	return m
}()

// idEdge reports that TrimSpace would not trim at byte c: printable ASCII
// (every other space, Unicode's included, is a control byte or starts
// at 0x80 or above).
func idEdge(c byte) bool { return c > ' ' && c < 0x7f }

// isPlaceholder compares after trimming spaces and ignoring ASCII case (the
// list is ASCII, so other case folding cannot matter).
func isPlaceholder(s string) bool {
	if n := len(s); n == 0 || !idEdge(s[0]) || !idEdge(s[n-1]) {
		s = strings.TrimSpace(s)
	}
	// Most ids have a length no placeholder has (two calls per synced
	// event made this loop 1 % of a sync).
	if len(s) == 0 || len(s) > 36 || placeholderLens&(1<<len(s)) == 0 {
		return false
	}
	for _, p := range placeholders {
		if len(p) == len(s) && asciiEqualFold(p, s) {
			return true
		}
	}
	return false
}

func asciiEqualFold(lower, s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// idByte marks the bytes allowed in an $insert_id: [A-Za-z0-9-].
var idByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
	}
	return t
}()

// ValidInsertID reports whether s passes the import API's $insert_id rule:
// 1–36 bytes of [A-Za-z0-9-] and not a placeholder. Warehouse and migration
// paths normalise anything else (engine/mapping.NormalizeInsertID).
func ValidInsertID(s string) bool {
	if len(s) == 0 || len(s) > maxInsertID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idByte[s[i]] {
			return false
		}
	}
	return !isPlaceholder(s)
}

// msFromNumber converts the text of a JSON number to milliseconds since the
// epoch, telling seconds from milliseconds by magnitude and rounding
// fractions to the millisecond. Range checks are the caller's.
func msFromNumber(raw string) (int64, bool) {
	if len(raw) > 0 && len(raw) <= 18 { // fast path: a plain non-negative integer
		var n int64
		i := 0
		for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			n = n*10 + int64(raw[i]-'0')
		}
		if i == len(raw) {
			if n < secondsBelow {
				return n * 1000, true
			}
			return n, true
		}
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false
	}
	if f < secondsBelow {
		f *= 1000
	}
	f = math.Round(f)
	if f > 1<<53 { // far beyond the time window; also keeps the conversion exact
		return 0, false
	}
	return int64(f), true
}

// timeMs applies the properties.time rules. A missing time fails only when
// required in strict mode; otherwise it is the server clock.
func (d *Decoder) timeMs(v *fastjson.Value, nowMs int64, required bool) (int64, bool) {
	if v == nil || (!d.strict && v.Type() == fastjson.TypeNull) {
		if required && d.strict {
			return 0, d.fail("properties.time", msgTime)
		}
		return nowMs, true
	}
	var ms int64
	ok := false
	switch v.Type() {
	case fastjson.TypeNumber:
		d.num = v.MarshalTo(d.num[:0]) // the raw text; the scanner vouched for it
		ms, ok = msFromNumber(b2s(d.num))
	case fastjson.TypeString:
		if !d.strict { // legacy SDKs sometimes send "1700000000"
			if s := strings.TrimSpace(b2s(v.GetStringBytes())); isNumber(s) {
				ms, ok = msFromNumber(s)
			}
		}
	}
	// Future times are not clamped: a retry must produce the same dedup key.
	switch {
	case !ok && v.Type() == fastjson.TypeNumber && len(d.num) > 0 && d.num[0] == '-':
		return 0, d.fail("properties.time", msgTimeBefore)
	case !ok && v.Type() == fastjson.TypeNumber: // beyond 2^53 ms
		return 0, d.fail("properties.time", msgFuture(-1))
	case !ok:
		return 0, d.fail("properties.time", msgTime)
	case ms < minTimeMs:
		return 0, d.fail("properties.time", msgTimeBefore)
	case ms > nowMs+maxAheadMs:
		return 0, d.fail("properties.time", msgFuture(ms-nowMs))
	}
	return ms, true
}

// msgFuture names the rule a future time breaks and by how much (aheadMs
// < 0: too far to say), so a client with a skewed clock or a unit mix-up
// can tell which.
func msgFuture(aheadMs int64) string {
	const rule = "'properties.time' is invalid: more than 1 hour in the future by the server clock"
	if aheadMs < 0 || aheadMs > 100*365*24*3600*1000 {
		return rule
	}
	ahead := time.Duration(aheadMs) * time.Millisecond
	if ahead >= maxAheadMs*time.Millisecond+time.Second { // whole seconds read better
		ahead = ahead.Round(time.Second)
	}
	return rule + " (" + ahead.String() + " ahead)"
}

// distinctID applies the distinct_id rules and returns a copy of the id.
func (d *Decoder) distinctID(f *fields) (string, bool) {
	v := f.distinctID
	if !d.strict && (v == nil || v.Type() == fastjson.TypeNull) {
		v = f.altDistinctID
	}
	d.where = "distinct_id"
	var s string
	switch {
	case v != nil && v.Type() == fastjson.TypeString:
		var ok bool
		if s, ok = d.text(b2s(v.GetStringBytes())); !ok {
			return "", false
		}
		if s, ok = d.ident("properties.distinct_id", s); !ok {
			return "", false
		}
	case d.strict:
		return "", d.fail("properties.distinct_id", msgDistinct)
	case v != nil && v.Type() == fastjson.TypeNumber:
		d.num = v.MarshalTo(d.num[:0])
		s = b2s(d.num)
	default:
		return "", true // lenient: no usable id; the event stays anonymous
	}
	if isPlaceholder(s) {
		if !d.strict {
			return "", true
		}
		return "", d.fail("properties.distinct_id",
			`'properties.distinct_id' is invalid: "`+strings.TrimSpace(s)+`" is a placeholder, not a user id`)
	}
	return d.keep(s), true
}

// insertIDValue applies the $insert_id rules. In lenient mode an invalid id
// is dropped: the event is kept but never deduplicated.
func (d *Decoder) insertIDValue(v *fastjson.Value) (string, bool) {
	if v == nil {
		return "", true
	}
	if v.Type() == fastjson.TypeString {
		if s := b2s(v.GetStringBytes()); ValidInsertID(s) {
			return d.keep(s), true
		}
	}
	if !d.strict {
		return "", true
	}
	return "", d.fail("properties.$insert_id", msgInsertID)
}

// text checks a string's UTF-8 (only when the scanner found a bad byte in the
// record) and truncates it. Strict mode fails the field being walked;
// lenient mode replaces bad bytes with U+FFFD.
// msgNUL refuses U+0000 in an identifier: PostgreSQL text cannot hold it,
// so one such id would fail a whole group-commit write on that store, and
// no real id contains it. Property values may (they are stored as JSON).
const msgNUL = " is invalid: must not contain the NUL character (U+0000)"

// ident checks a decoded identifier (event name, distinct_id, a merge's
// ids) for NUL: strict mode fails the record, lenient mode replaces it.
func (d *Decoder) ident(field, s string) (string, bool) {
	if strings.IndexByte(s, 0) < 0 {
		return s, true
	}
	if d.strict {
		return "", d.fail(field, "'"+field+"'"+msgNUL)
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), true
}

func (d *Decoder) text(s string) (string, bool) {
	if d.checkUTF8 && !utf8.ValidString(s) {
		if d.strict {
			field := "event"
			if !d.inEvent {
				field = "properties." + sanitize(d.where)
			}
			return "", d.fail(field, field+" is invalid: string should be valid utf8")
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return truncate(s), true
}
