package record

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/jsonscan"
)

// The canonical path validates, in one pass and without a parse tree, the
// records Tributary's own encoders write (the warehouse mapper, the
// Amplitude transform):
//
//	{"event":"…","properties":{"time":…,"distinct_id":"…","$insert_id":"…",…}}
//
// compact, with no escapes or control bytes in any string, every string at
// most 255 bytes and containers within the depth and size rules. For such a
// record no rule can change a value, so Props is the bytes after
// $insert_id, copied. The general path parses the record with fastjson and
// re-encodes every property, which cost those encoders about 2.3 µs of
// their ~8 µs per row.
//
// Anything else (another shape, a value some rule would refuse or change:
// a long string, a placeholder id, a time outside the window) returns
// false having changed nothing, and the general path decides. So the two
// paths agree on every record by construction; TestCanonicalMatchesDecode
// and FuzzCanonical check it.

const (
	canonHead  = `{"event":"`
	canonProps = `,"properties":{`
)

// canonScan is the state of one canonical scan.
type canonScan struct {
	b    []byte
	hi   bool     // a byte ≥ 0x80 was seen: check the record's UTF-8
	keys []string // top-level property keys, for the duplicate rule
	user string   // first $user_id, when a string
	dev  string   // first $device_id, when a string
	// hasUser, hasDev: the key was present (with any value).
	hasUser, hasDev bool
}

// canonical appends the event rec holds and reports true when rec is
// canonical and valid; false means "take the general path", never "invalid".
// v, when not nil, is the encoder's word about parts of rec (Vouch).
func (d *Decoder) canonical(opt *Options, rec []byte, nowMs int64, out *store.Batch, v *Vouch) bool {
	if len(rec) < len(canonHead) || string(rec[:len(canonHead)]) != canonHead {
		return false
	}
	s := &d.canon
	*s = canonScan{b: rec, keys: s.keys[:0]}
	var h head
	ok := false
	if v != nil && v.Head {
		h, ok = vouchedHead(rec, v)
	} else {
		h, ok = s.head()
	}
	if !ok || h.name == "" || h.name == "$merge" ||
		(opt.Mode == identity.Original && (h.name == "$identify" || h.name == "$create_alias")) {
		return false
	}
	name, did, iid, i := h.name, h.did, h.iid, h.rest
	rest := i // ',' before the other properties, or the closing '}'
	simplified := opt.Mode == identity.Simplified
	members := 3 + opt.CommonProps
	vouched := v != nil && v.Rest
	if vouched {
		// The shape around the vouched members still holds, so a wrong
		// vouch cannot take bytes from outside the record.
		if i > len(rec)-2 || rec[i] != ',' && i != len(rec)-2 {
			return false
		}
		members += int(v.Members)
		if simplified && !s.leadingIDs(i) {
			return false
		}
		i = len(rec) - 2 // the closing braces, checked below
	}
	for !vouched && i+1 < len(rec) && rec[i] == ',' && rec[i+1] == '"' {
		k, j, ok := s.str(i + 2)
		if !ok || j >= len(rec) || rec[j] != ':' {
			return false
		}
		members++
		if !opt.UniqueNames {
			s.keys = append(s.keys, k)
		}
		j++
		if simplified && (k == "$user_id" || k == "$device_id") && !s.idValue(k, j) {
			return false
		}
		if i, ok = s.value(j, 0); !ok {
			return false
		}
	}
	if len(rec)-i != 2 || rec[i] != '}' || rec[i+1] != '}' {
		return false
	}
	if s.hi && !utf8.Valid(rec) {
		return false
	}
	if members > maxMembers || !opt.UniqueNames && !vouched && !d.uniqueKeys() {
		return false
	}
	if ms := h.ms; ms < minTimeMs || ms > nowMs+maxAheadMs || !h.iidValid && !ValidInsertID(iid) {
		return false
	}
	var user, device string
	derived := false
	if simplified {
		if s.hasUser && isPlaceholder(s.user) || s.hasDev && isPlaceholder(s.dev) {
			return false // idString would drop it; rare enough for the general path
		}
		user, device = s.user, s.dev
		derived = user != "" || device != ""
	}
	if !derived && isPlaceholder(did) {
		return false
	}

	// Every rule holds: build the event as the general path would.
	switch {
	case user != "":
		user = d.keep(user)
		did = user
	case device != "":
		did = d.keep(identity.DevicePrefix + device)
	default:
		did = d.keep(did)
	}
	if device != "" {
		device = d.keep(device)
	}
	if user != "" && device != "" {
		out.Changes = append(out.Changes, store.Change{Event: len(out.Events), Ref: d.idx,
			Change: identity.Change{Kind: identity.KindLink, A: user, B: device}})
	}
	var props []byte
	if opt.Lend && rec[rest] == ',' {
		// {"event":…,"properties":{…,"$insert_id":"…",REST}} → the
		// properties are {REST}: the comma becomes '{' and the first
		// closing brace ends them.
		rec[rest] = '{'
		props = rec[rest : len(rec)-1 : len(rec)-1]
	} else {
		p := len(d.arena)
		d.arena = append(d.arena, '{')
		if rec[rest] == ',' {
			d.arena = append(d.arena, rec[rest+1:len(rec)-2]...)
		}
		d.arena = append(d.arena, '}')
		props = d.arena[p:len(d.arena):len(d.arena)]
	}
	name = d.intern(name)
	iid = d.keep(iid)
	out.Events = append(out.Events, store.Event{Name: name, DistinctID: did, TimeMs: h.ms, InsertID: iid,
		Props: props, IngestMs: nowMs, Key: store.DedupKey(opt.Project, name, did, h.ms, iid)})
	return true
}

// head is what a canonical record's first members say.
type head struct {
	name, did, iid string
	time           string // the time member's text
	ms             int64
	rest           int  // index after $insert_id's closing quote
	iidValid       bool // ValidInsertID(iid) is known to hold
}

// head reads the event name, time, distinct_id and $insert_id.
func (s *canonScan) head() (h head, ok bool) {
	rec := s.b
	name, i, ok := s.str(len(canonHead))
	if !ok || len(rec)-i < len(canonProps) || string(rec[i:i+len(canonProps)]) != canonProps {
		return h, false
	}
	i += len(canonProps)
	if i, ok = s.key(i, "time"); !ok {
		return h, false
	}
	start := i
	if i, ok = s.number(i); !ok {
		return h, false
	}
	h.time = b2s(rec[start:i])
	if h.ms, ok = msFromNumber(h.time); !ok {
		return h, false
	}
	if i, ok = s.next(i, "distinct_id"); !ok {
		return h, false
	}
	if h.did, i, ok = s.strValue(i); !ok {
		return h, false
	}
	if i, ok = s.next(i, "$insert_id"); !ok {
		return h, false
	}
	if h.iid, i, ok = s.strValue(i); !ok {
		return h, false
	}
	h.name, h.rest = name, i
	return h, true
}

// uniqueKeys applies the duplicate-key rule to time, distinct_id,
// $insert_id and the scanned keys.
func (d *Decoder) uniqueKeys() bool {
	s := &d.canon
	d.seen.reset(len(s.keys) + 3)
	for _, k := range [...]string{"time", "distinct_id", "$insert_id"} {
		d.seen.addTrusted(k)
	}
	for _, k := range s.keys {
		if !d.seen.addTrusted(k) {
			return false
		}
	}
	return true
}

// str reads string content from i (after the opening quote) and returns
// it and the index after the closing quote. ok is false for an escape, a
// control byte, more than maxRunes bytes or no closing quote. Eight bytes
// of plain ASCII are skipped at a time.
func (s *canonScan) str(i int) (string, int, bool) {
	b := s.b
	start := i
	for {
		for i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			f := (jsonscan.Special(w) | w) & jsonscan.MSB
			if f == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(f) >> 3 // the first flag is exact
			break
		}
		if i >= len(b) {
			return "", i, false
		}
		switch c := b[i]; {
		case plain[c]:
		case c == '"':
			if i-start > maxRunes {
				return "", i, false
			}
			return b2s(b[start:i]), i + 1, true
		case c >= 0x80:
			s.hi = true
		default: // '\\' or a control byte
			return "", i, false
		}
		i++
	}
}

// strValue reads a string value at i.
func (s *canonScan) strValue(i int) (string, int, bool) {
	if i >= len(s.b) || s.b[i] != '"' {
		return "", i, false
	}
	return s.str(i + 1)
}

// key expects `"name":` at i.
func (s *canonScan) key(i int, name string) (int, bool) {
	b := s.b
	n := len(name) + 3
	if len(b)-i < n || b[i] != '"' || string(b[i+1:i+1+len(name)]) != name || b[i+1+len(name)] != '"' || b[i+2+len(name)] != ':' {
		return i, false
	}
	return i + n, true
}

// next expects `,"name":` at i.
func (s *canonScan) next(i int, name string) (int, bool) {
	if i >= len(s.b) || s.b[i] != ',' {
		return i, false
	}
	return s.key(i+1, name)
}

// number reads a number at i; one out of the stored range is left to the
// general path, which fails the record naming its field.
func (s *canonScan) number(i int) (int, bool) {
	j, big, err := number(s.b, i)
	return j, err == nil && !big
}

// idValue notes the first $user_id or $device_id at i; a value other than
// a string sends the record to the general path (idString reads numbers).
func (s *canonScan) idValue(k string, i int) bool {
	v, _, ok := s.strValue(i)
	if !ok {
		return false
	}
	if k == "$user_id" {
		if !s.hasUser {
			s.user, s.hasUser = v, true
		}
	} else if !s.hasDev {
		s.dev, s.hasDev = v, true
	}
	return true
}

// value checks one value at i; depth is that of the general path's value
// (0 for a top-level property). It returns the index after the value.
func (s *canonScan) value(i, depth int) (int, bool) {
	b := s.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '"':
		_, j, ok := s.str(i + 1)
		return j, ok
	case 't':
		return canonLit(b, i, "true")
	case 'f':
		return canonLit(b, i, "false")
	case 'n':
		return canonLit(b, i, "null")
	case '{', '[':
		if depth >= maxDepth {
			return i, false
		}
		return s.container(i, depth)
	}
	return s.number(i)
}

func canonLit(b []byte, i int, lit string) (int, bool) {
	j, err := literal(b, i, lit)
	return j, err == nil
}

// container checks an object or array at i whose items sit at depth+1.
func (s *canonScan) container(i, depth int) (int, bool) {
	b := s.b
	obj := b[i] == '{'
	end := b[i] + 2 // '}' or ']'
	i++
	if i < len(b) && b[i] == end {
		return i + 1, true
	}
	for n := 1; ; n++ {
		if n > maxMembers {
			return i, false
		}
		ok := true
		if obj {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			if _, i, ok = s.str(i + 1); !ok || i >= len(b) || b[i] != ':' {
				return i, false
			}
			i++
		}
		if i, ok = s.value(i, depth+1); !ok || i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i++
		case end:
			return i + 1, true
		default:
			return i, false
		}
	}
}
