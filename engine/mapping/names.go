package mapping

import "strings"

// FixedNames returns the property names the mapper writes from table
// columns (STRUCT fields flattened), in plan order: every name a row's
// record holds unless its value is NULL. The keys of MAP and JSON columns
// are only known per row and are not included. A full_sync profile run
// unsets the fixed names a row leaves out.
func (m *Mapper) FixedNames() []string {
	var out []string
	for _, l := range m.props {
		if !l.dyn {
			out = append(out, l.name)
		}
	}
	return out
}

// KeyAt returns the key (user or group id, lookup key) of row i of the
// batch last given to Map, as the record would carry it unescaped; ok is
// false when it is NULL or empty. It lets a caller name the profile of a
// row the mapper refused.
func (m *Mapper) KeyAt(i int) (key string, ok bool) {
	if m.key < 0 || m.roots[m.key].arr == nil || i < 0 || i >= m.roots[m.key].arr.Len() {
		return "", false
	}
	k, ok := m.text(m.key, i)
	if !ok || k == "" {
		return "", false
	}
	return strings.Clone(k), true // text may point into scratch or Arrow memory
}
