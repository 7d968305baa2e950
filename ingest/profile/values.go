package profile

import (
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tributary-dev/tributary/ingest/jsonnum"
	"github.com/tributary-dev/tributary/internal/jsonw"
	"github.com/valyala/fastjson"
)

const (
	minTimeMs    = 31_536_000_000 // 1971-01-01, the import API's lower bound
	secondsBelow = 10_000_000_000 // a time below this is seconds, else ms
)

// appendValue re-encodes v compactly. Strings go through jsonw so that equal
// strings always get equal bytes, which lets list operations compare
// elements bytewise; numbers keep their text. When big is not nil, it is
// set if v holds a number out of the range Tributary stores (package
// jsonnum), found in the same walk.
func appendValue(dst []byte, v *fastjson.Value, big *bool) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		dst = append(dst, '{')
		n := 0
		o.Visit(func(k []byte, e *fastjson.Value) {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = append(jsonw.String(dst, b2s(k)), ':')
			dst = appendValue(dst, e, big)
		})
		return append(dst, '}')
	case fastjson.TypeArray:
		arr, _ := v.Array()
		dst = append(dst, '[')
		for i, e := range arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, e, big)
		}
		return append(dst, ']')
	case fastjson.TypeString:
		return jsonw.String(dst, b2s(v.GetStringBytes()))
	case fastjson.TypeNumber:
		p := len(dst)
		dst = v.MarshalTo(dst) // its text
		if big != nil && jsonnum.TokenOutOfRange(dst[p:]) {
			*big = true
		}
		return dst
	default: // true, false, null
		return v.MarshalTo(dst)
	}
}

func requiredString(field string, v *fastjson.Value) (string, error) {
	if v == nil || v.Type() != fastjson.TypeString || len(v.GetStringBytes()) == 0 {
		return "", invalid(field, "must be a non-empty string")
	}
	return noNUL(field, string(v.GetStringBytes()))
}

// noNUL refuses U+0000 in an identifier: PostgreSQL text cannot hold it,
// so one such id would fail a whole write on that store.
func noNUL(field, s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", invalid(field, "must not contain the NUL character (U+0000)")
	}
	return s, nil
}

// idText accepts a string or a number (SDKs in dynamic languages pass numeric
// ids through unchanged), keeping a number's JSON text.
func idText(field string, v *fastjson.Value) (string, error) {
	if v != nil && v.Type() == fastjson.TypeNumber {
		return string(v.MarshalTo(nil)), nil
	}
	if v == nil || v.Type() != fastjson.TypeString || strings.TrimSpace(b2s(v.GetStringBytes())) == "" {
		return "", invalid(field, "must be a non-empty string")
	}
	return noNUL(field, string(v.GetStringBytes()))
}

// boolish reads a flag the way the SDKs send it: JSON booleans
// (mixpanel-utils), "true"/"false" strings (mixpanel-go), or 0/1.
func boolish(field string, v *fastjson.Value) (bool, error) {
	if v == nil {
		return false, nil
	}
	switch v.Type() {
	case fastjson.TypeTrue:
		return true, nil
	case fastjson.TypeFalse, fastjson.TypeNull:
		return false, nil
	case fastjson.TypeString, fastjson.TypeNumber:
		s := b2s(v.GetStringBytes())
		if v.Type() == fastjson.TypeNumber {
			s = string(v.MarshalTo(nil))
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true", "1":
			return true, nil
		case "false", "0", "":
			return false, nil
		}
	}
	return false, invalid(field, "must be true or false")
}

// ipText keeps $ip as text: mixpanel-go sends "0" or an address string,
// mixpanel-utils the number 0.
func ipText(v *fastjson.Value) (string, error) {
	switch {
	case v == nil || v.Type() == fastjson.TypeNull:
		return "", nil
	case v.Type() == fastjson.TypeString:
		return strings.TrimSpace(string(v.GetStringBytes())), nil
	case v.Type() == fastjson.TypeNumber:
		return string(v.MarshalTo(nil)), nil
	}
	return "", invalid("$ip", "must be an IP address string or 0")
}

// timeMs reads $time as seconds or milliseconds since the epoch, told apart
// by magnitude as for properties.time. mixpanel-python sends float seconds,
// mixpanel-node integer seconds, mixpanel-ruby milliseconds.
func timeMs(v *fastjson.Value) (int64, error) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return 0, nil
	}
	const why = "must be seconds or milliseconds since the epoch, not before 1971"
	if v.Type() != fastjson.TypeNumber {
		return 0, invalid("$time", why)
	}
	f, err := strconv.ParseFloat(string(v.MarshalTo(nil)), 64)
	if err != nil || math.IsNaN(f) {
		return 0, invalid("$time", why)
	}
	if f < secondsBelow {
		f *= 1000
	}
	f = math.Round(f)
	if f < minTimeMs || f > 1<<53 {
		return 0, invalid("$time", why)
	}
	return int64(f), nil
}

// truncateName cuts a property name to MaxNameRunes runes.
func truncateName(s string) string {
	if len(s) <= MaxNameRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxNameRunes {
			return s[:i]
		}
		n++
	}
	return s
}

func indexField(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }

// placeholders are refused as $distinct_id, as on the import API: SDK bugs
// send them for every user, and accepting them would merge all those users
// into one profile.
func isPlaceholder(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "00000000-0000-0000-0000-000000000000", "anon", "anonymous", "nil", "none",
		"null", "n/a", "na", "undefined", "unknown", "<nil>", "0", "-1", "true",
		"false", "[]", "{}":
		return true
	}
	return false
}

// b2s views b as a string without copying, for lookups and copies made while
// b is unchanged.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
