package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/internal/jsonw"
	"github.com/valyala/fastjson"
)

// Profile is one user or group profile: properties in the order they were
// first set (stable output), each value compact JSON. The zero value is a
// profile that does not exist; Apply creates and deletes it. It is not safe
// for concurrent use.
type Profile struct {
	props  []Property
	index  map[string]int // name → position in props; nil until first lookup
	exists bool
}

// Exists reports whether the profile exists: created by an update and not
// deleted since.
func (p *Profile) Exists() bool { return p.exists }

// Len is the number of properties, $last_seen included.
func (p *Profile) Len() int { return len(p.props) }

// Get returns the compact JSON value of a property. The bytes belong to the
// profile: do not modify them.
func (p *Profile) Get(name string) ([]byte, bool) {
	if i := p.lookup(name); i >= 0 {
		return p.props[i].Value, true
	}
	return nil, false
}

// All yields the properties in order. Values belong to the profile.
func (p *Profile) All() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, pr := range p.props {
			if !yield(pr.Name, pr.Value) {
				return
			}
		}
	}
}

// AppendJSON appends the profile as one compact JSON object, or null when it
// does not exist.
func (p *Profile) AppendJSON(dst []byte) []byte {
	if !p.exists {
		return append(dst, "null"...)
	}
	dst = append(dst, '{')
	for i, pr := range p.props {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsonw.String(dst, pr.Name), ':')
		dst = append(dst, pr.Value...)
	}
	return append(dst, '}')
}

// MarshalJSON is AppendJSON for encoding/json and for stores.
func (p *Profile) MarshalJSON() ([]byte, error) { return p.AppendJSON(nil), nil }

// UnmarshalJSON replaces p with a profile encoded by AppendJSON (or any JSON
// object: values are re-encoded compactly and a repeated name keeps its first
// position and last value).
func (p *Profile) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if !utf8.Valid(data) || !json.Valid(data) {
		return fmt.Errorf("profile: %w: not valid JSON", ErrInvalid)
	}
	if string(data) == "null" {
		*p = Profile{}
		return nil
	}
	var ps fastjson.Parser
	v, err := ps.ParseBytes(data)
	if err != nil {
		return fmt.Errorf("profile: %w: %v", ErrInvalid, err)
	}
	obj, err := v.Object()
	if err != nil {
		return fmt.Errorf("profile: %w: must be a JSON object or null", ErrInvalid)
	}
	// One arena for all values: one allocation per profile, not per value.
	var arena []byte
	type span struct {
		name       string
		start, end int
	}
	spans := make([]span, 0, obj.Len())
	obj.Visit(func(k []byte, e *fastjson.Value) {
		start := len(arena)
		arena = appendValue(arena, e, nil) // stored values are not re-judged
		spans = append(spans, span{string(k), start, len(arena)})
	})
	np := Profile{exists: true, props: make([]Property, 0, len(spans))}
	for _, s := range spans {
		np.set(s.name, arena[s.start:s.end:s.end])
	}
	*p = np
	return nil
}

// lookup returns the position of name, or -1.
func (p *Profile) lookup(name string) int {
	if len(p.props) <= 8 { // a scan beats building a map for small profiles
		for i := range p.props {
			if p.props[i].Name == name {
				return i
			}
		}
		return -1
	}
	if p.index == nil {
		p.index = make(map[string]int, len(p.props))
		for i, pr := range p.props {
			p.index[pr.Name] = i
		}
	}
	if i, ok := p.index[name]; ok {
		return i
	}
	return -1
}

// set replaces the value of name in place, or appends it.
func (p *Profile) set(name string, v []byte) {
	if i := p.lookup(name); i >= 0 {
		p.props[i].Value = v
		return
	}
	p.props = append(p.props, Property{Name: name, Value: v})
	if p.index != nil {
		p.index[name] = len(p.props) - 1
	}
}

// unset removes name, keeping the order of the others.
func (p *Profile) unset(name string) {
	i := p.lookup(name)
	if i < 0 {
		return
	}
	copy(p.props[i:], p.props[i+1:])
	p.props[len(p.props)-1] = Property{}
	p.props = p.props[:len(p.props)-1]
	p.index = nil // positions shifted; rebuilt on the next lookup
}

// unsetAll removes names in one pass, so a long $unset on a large profile
// stays linear instead of shifting the slice once per name.
func (p *Profile) unsetAll(names []string) {
	if len(names) == 1 {
		p.unset(names[0])
		return
	}
	drop := make(map[string]struct{}, len(names))
	for _, n := range names {
		drop[n] = struct{}{}
	}
	kept := p.props[:0]
	for _, pr := range p.props {
		if _, ok := drop[pr.Name]; !ok {
			kept = append(kept, pr)
		}
	}
	clear(p.props[len(kept):])
	p.props = kept
	p.index = nil
}

// reset deletes the profile.
func (p *Profile) reset() { *p = Profile{} }

// countable is the number of properties that count against MaxProperties.
func (p *Profile) countable() int {
	if p.lookup(LastSeen) >= 0 {
		return len(p.props) - 1
	}
	return len(p.props)
}

var (
	_ json.Marshaler   = (*Profile)(nil)
	_ json.Unmarshaler = (*Profile)(nil)
)
