package record

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"

	"github.com/valyala/fastjson"
)

const (
	maxMembers = 254 // properties, object keys and array items: "fewer than 255"
	maxDepth   = 3   // a property's object or array value is depth 1
)

// skipKey reports whether a top-level property is kept out of Props because
// it lives in a dedicated field of the stored record.
func skipKey(k string, merge bool) bool {
	if merge {
		return k == "$distinct_ids" || k == "token"
	}
	return k == "time" || k == "distinct_id" || k == "$insert_id"
}

// emitProps re-encodes the properties compactly into the arena, in their
// original order, applying truncation and the count, depth and UTF-8 rules.
// It returns a slice of the arena capped so that a caller's append cannot
// overwrite the next record's bytes.
func (d *Decoder) emitProps(merge bool) ([]byte, bool) {
	start := len(d.arena)
	d.arena = append(d.arena, '{')
	d.seen.reset(len(d.props))
	n := 0
	for _, m := range d.props {
		d.where = m.k
		key, ok := d.text(m.k)
		if ok && !d.seen.add(key) {
			// Repeated keys make the dedup fields ambiguous: strict mode
			// refuses them, lenient mode keeps the first, like the lookups.
			if !d.strict {
				continue
			}
			f := "properties." + sanitize(key)
			ok = d.fail(f, "'"+f+"' is invalid: duplicate key")
		}
		if !ok {
			d.arena = d.arena[:start]
			return nil, false
		}
		if skipKey(m.k, merge) {
			continue
		}
		if n > 0 {
			d.arena = append(d.arena, ',')
		}
		n++
		d.arena = appendString(d.arena, key, d.escapes)
		d.arena = append(d.arena, ':')
		if !d.value(m.v, 0) {
			d.arena = d.arena[:start]
			return nil, false
		}
	}
	d.arena = append(d.arena, '}')
	end := len(d.arena)
	return d.arena[start:end:end], true
}

// value appends v; depth is the nesting level of the container holding it
// (0 for a top-level property).
func (d *Decoder) value(v *fastjson.Value, depth int) bool {
	switch v.Type() {
	case fastjson.TypeString:
		s, ok := d.text(b2s(v.GetStringBytes()))
		if !ok {
			return false
		}
		d.arena = appendString(d.arena, s, d.escapes)
	case fastjson.TypeNumber:
		p := len(d.arena)
		d.arena = v.MarshalTo(d.arena) // raw text, validated by the scanner
		if d.sc.big && bigNumber(d.arena[p:]) {
			return d.failLimit(msgBigNumber)
		}
	case fastjson.TypeTrue:
		d.arena = append(d.arena, "true"...)
	case fastjson.TypeFalse:
		d.arena = append(d.arena, "false"...)
	case fastjson.TypeNull:
		d.arena = append(d.arena, "null"...)
	case fastjson.TypeObject:
		if depth >= maxDepth {
			return d.failLimit("nesting depth must be at most 3")
		}
		o, _ := v.Object()
		if o.Len() > maxMembers {
			return d.failLimit("nested objects must have fewer than 255 keys")
		}
		return d.object(o, depth+1)
	case fastjson.TypeArray:
		if depth >= maxDepth {
			return d.failLimit("nesting depth must be at most 3")
		}
		a, _ := v.Array()
		if len(a) > maxMembers {
			return d.failLimit("arrays must have fewer than 255 items")
		}
		d.arena = append(d.arena, '[')
		for i, e := range a {
			if i > 0 {
				d.arena = append(d.arena, ',')
			}
			if !d.value(e, depth+1) {
				return false
			}
		}
		d.arena = append(d.arena, ']')
	}
	return true
}

func (d *Decoder) object(o *fastjson.Object, depth int) bool {
	d.arena = append(d.arena, '{')
	ok, first := true, true
	o.Visit(func(k []byte, c *fastjson.Value) {
		if !ok {
			return
		}
		var key string
		if key, ok = d.text(b2s(k)); !ok {
			return
		}
		if !first {
			d.arena = append(d.arena, ',')
		}
		first = false
		d.arena = appendString(d.arena, key, d.escapes)
		d.arena = append(d.arena, ':')
		ok = d.value(c, depth)
	})
	d.arena = append(d.arena, '}')
	return ok
}

func (d *Decoder) failLimit(what string) bool {
	f := "properties." + sanitize(d.where)
	return d.fail(f, "'"+f+"' is invalid: "+what)
}

// keySet finds repeated top-level property keys. Most events have a dozen
// properties, for which comparing a packed signature (length and edge bytes)
// pairwise is cheapest; larger objects use a seeded hash table, so crafted
// keys cannot make the check quadratic. A generation counter makes reset O(1).
type keySet struct {
	small bool
	sigs  []uint32
	keys  []string
	seed  maphash.Seed
	init  bool
	gen   uint32
	slots [512]struct{ gen, idx uint32 } // ≤ maxMembers keys: load ≤ 50%
}

const smallSet = 16

func (s *keySet) reset(n int) {
	s.small = n <= smallSet
	s.sigs, s.keys = s.sigs[:0], s.keys[:0]
	if s.small {
		return
	}
	if !s.init {
		s.seed, s.init = maphash.MakeSeed(), true
	}
	if s.gen++; s.gen == 0 { // wrapped: stale slots could look current
		s.slots = [512]struct{ gen, idx uint32 }{}
		s.gen = 1
	}
}

// add inserts k and reports whether it was new.
func (s *keySet) add(k string) bool {
	if s.small {
		sig := uint32(len(k))
		if len(k) > 0 {
			sig |= uint32(k[0])<<16 | uint32(k[len(k)-1])<<24
		}
		for i, o := range s.sigs {
			if o == sig && s.keys[i] == k {
				return false
			}
		}
		s.sigs, s.keys = append(s.sigs, sig), append(s.keys, k)
		return true
	}
	return s.addHashed(k, maphash.String(s.seed, k))
}

// addTrusted is add with a cheap hash of the length and the edge bytes,
// for keys that come from Tributary's own encoders (Options.Canonical):
// keys crafted to collide only slow the check down, to at worst a
// comparison with each earlier key, as the small mode does anyway.
func (s *keySet) addTrusted(k string) bool {
	if s.small {
		return s.add(k)
	}
	h := uint64(len(k))
	if len(k) >= 8 {
		h ^= binary.LittleEndian.Uint64([]byte(k[:8])) ^ bits.RotateLeft64(binary.LittleEndian.Uint64([]byte(k[len(k)-8:])), 31)
	} else {
		for i := 0; i < len(k); i++ {
			h = h<<8 | uint64(k[i])
		}
	}
	h *= 0x9E3779B97F4A7C15
	return s.addHashed(k, h^h>>29)
}

func (s *keySet) addHashed(k string, h uint64) bool {
	for j := h & 511; ; j = (j + 1) & 511 {
		sl := &s.slots[j]
		if sl.gen != s.gen {
			sl.gen, sl.idx = s.gen, uint32(len(s.keys))
			s.keys = append(s.keys, k)
			return true
		}
		if s.keys[sl.idx] == k {
			return false
		}
	}
}
