package profile

import (
	"bytes"
	"time"
)

// lastSeenLayout is how Mixpanel shows $last_seen: UTC, to the second.
const lastSeenLayout = "2006-01-02T15:04:05"

// Apply applies u to p with Mixpanel's semantics; nowMs is the server clock
// in milliseconds since the epoch, used for $last_seen when u has no $time.
//
// It is all or nothing: on error p is unchanged. Values in u must be compact
// JSON, as the Parser produces; p keeps copies, never u's bytes.
//
//   - $set replaces values and $set_once sets only absent ones; both, like
//     $add, $union and $append, create a missing profile.
//   - $add adds to a number; a missing (or null) property counts as 0.
//   - $union appends the values not yet in the list, $append appends one
//     value, $remove drops every element equal to the value. Equal means the
//     same JSON value: numbers compare numerically (1 = 1.0), and 1 ≠ "1".
//   - $unset and $remove never create a profile; $delete removes it, and a
//     later update starts a new one from nothing.
//   - Unless u.IgnoreTime, $last_seen becomes u.TimeMs (or nowMs) — except
//     when the update itself sets $last_seen.
func Apply(p *Profile, u Update, nowMs int64) error {
	if !u.Kind.Supports(u.Op) {
		return fieldErr(ErrUnsupported, u.Op.String(), "'%s' is not supported on %s profiles", u.Op, u.Kind)
	}
	switch u.Op {
	case OpDelete:
		p.reset()
		return nil
	case OpUnset:
		if !p.exists {
			return nil
		}
		p.unsetAll(u.Unset)
		touch(p, u, nowMs)
		return nil
	case OpRemove:
		if !p.exists {
			return nil
		}
	}
	w := pending{p: p}
	for _, pr := range u.Props {
		if err := w.step(u.Op, pr); err != nil {
			return err
		}
	}
	added := 0
	for _, pr := range w.out {
		if pr.Name != LastSeen && p.lookup(pr.Name) < 0 {
			added++
		}
	}
	if n := p.countable() + added; added > 0 && n > MaxProperties {
		return fieldErr(ErrTooManyProperties, u.Op.String(),
			"the profile would have %d properties; the limit is %d", n, MaxProperties)
	}
	p.exists = true
	for _, pr := range w.out {
		p.set(pr.Name, pr.Value)
	}
	touch(p, u, nowMs)
	return nil
}

// touch maintains $last_seen.
func touch(p *Profile, u Update, nowMs int64) {
	if u.IgnoreTime {
		return
	}
	if u.Op == OpSet || u.Op == OpSetOnce {
		for _, pr := range u.Props {
			if pr.Name == LastSeen {
				return // the caller's own value wins
			}
		}
	}
	ms := u.TimeMs
	if ms == 0 {
		ms = nowMs
	}
	v := time.UnixMilli(ms).UTC().AppendFormat([]byte{'"'}, lastSeenLayout)
	p.set(LastSeen, append(v, '"'))
}

// pending holds the new values an update computes before any is written, so
// that a failure part-way leaves the profile untouched. Later operands see
// earlier ones (a repeated name in a hand-built Update acts twice).
type pending struct {
	p   *Profile
	out []Property
	pos map[string]int // name → index in out, once out is long enough
}

func (w *pending) find(name string) int {
	if w.pos != nil {
		if i, ok := w.pos[name]; ok {
			return i
		}
		return -1
	}
	for i := range w.out {
		if w.out[i].Name == name {
			return i
		}
	}
	return -1
}

func (w *pending) get(name string) ([]byte, bool) {
	if i := w.find(name); i >= 0 {
		return w.out[i].Value, true
	}
	return w.p.Get(name)
}

func (w *pending) put(name string, v []byte) {
	if i := w.find(name); i >= 0 {
		w.out[i].Value = v
		return
	}
	w.out = append(w.out, Property{Name: name, Value: v})
	if w.pos != nil {
		w.pos[name] = len(w.out) - 1
	} else if len(w.out) > 16 {
		w.pos = make(map[string]int, 2*len(w.out))
		for i, pr := range w.out {
			w.pos[pr.Name] = i
		}
	}
}

func (w *pending) step(op Op, pr Property) error {
	field := op.String() + "." + pr.Name
	cur, ok := w.get(pr.Name)
	switch op {
	case OpSet:
		w.put(pr.Name, bytes.Clone(pr.Value))
	case OpSetOnce:
		if !ok {
			w.put(pr.Name, bytes.Clone(pr.Value))
		}
	case OpAdd:
		sum, err := addNumbers(field, cur, pr.Value)
		if err != nil {
			return err
		}
		w.put(pr.Name, sum)
	case OpUnion, OpAppend:
		list, err := extend(field, op, cur, pr.Value)
		if err != nil {
			return err
		}
		if list != nil {
			w.put(pr.Name, list)
		}
	case OpRemove:
		if list := without(cur, pr.Value); list != nil {
			w.put(pr.Name, list)
		}
	}
	return nil
}
