package enrich

import (
	"github.com/valyala/fastjson"
)

// Applier enriches records with a fixed set of loaded tables. It reuses
// its parser and buffer across calls, so it belongs to one goroutine; a
// nil or empty Applier returns every record unchanged without parsing it.
type Applier struct {
	tabs []boundTable
	p    fastjson.Parser
	buf  []byte
	key  []byte
	// added names this call's properties when several tables apply, so two
	// tables with a column in common cannot emit one name twice.
	added []string
}

type boundTable struct {
	prop string
	rows map[string][]member
}

// Empty reports whether Apply can never change a record.
func (a *Applier) Empty() bool { return a == nil || len(a.tabs) == 0 }

// Apply returns props (a compact JSON object) with the lookup properties
// its keys select appended. When nothing applies it returns props itself;
// otherwise a buffer that the next call reuses.
func (a *Applier) Apply(props []byte) []byte {
	if a.Empty() || len(props) < 2 || props[len(props)-1] != '}' {
		return props
	}
	v, err := a.p.ParseBytes(props)
	if err != nil {
		return props
	}
	obj, err := v.Object()
	if err != nil {
		return props
	}
	out := a.buf[:0]
	a.added = a.added[:0]
	grown := false
	for _, t := range a.tabs {
		kv := obj.Get(t.prop)
		if kv == nil {
			continue
		}
		var key []byte
		switch kv.Type() {
		case fastjson.TypeString:
			key = kv.GetStringBytes()
		case fastjson.TypeNumber:
			a.key = kv.MarshalTo(a.key[:0]) // the number's text as stored
			key = a.key
		default:
			continue
		}
		ms, ok := t.rows[string(key)] // no allocation: the compiler sees the lookup
		if !ok {
			continue
		}
		for _, m := range ms {
			if obj.Get(m.name) != nil || a.seen(m.name) {
				continue // the record's own value (or an earlier table's) wins
			}
			if len(a.tabs) > 1 {
				a.added = append(a.added, m.name)
			}
			if !grown {
				grown = true
				out = append(out, props[:len(props)-1]...) // all but the closing '}'
				if obj.Len() > 0 {
					out = append(out, ',')
				}
			} else {
				out = append(out, ',')
			}
			out = append(out, m.enc...)
		}
	}
	if !grown {
		return props
	}
	a.buf = append(out, '}')
	return a.buf
}

func (a *Applier) seen(name string) bool {
	for _, n := range a.added {
		if n == name {
			return true
		}
	}
	return false
}
