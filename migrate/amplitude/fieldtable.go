package amplitude

// fieldTable maps the names of the mapped top-level export fields to
// their slot in transformer.top. A Go map hashed each of an event's ~45
// keys in full (about a fifth of the transform's time); these names differ
// enough in length and first and last byte that a hash of those three,
// confirmed by one comparison, finds them, and most other keys miss at
// the first empty entry. Any hash would be correct: the comparison decides.
// The transform also keeps the property names it writes itself in one
// (transformer.fixed), each mapped to its bit in transformer.taken.
type fieldTable struct {
	names [fieldTableSize]string
	slots [fieldTableSize]int // slot+1; 0: empty entry
}

// fieldTableSize is a power of two well above the number of names, so
// probes stay short.
const fieldTableSize = 128

func fieldHash(k []byte) int {
	n := len(k)
	return (n*131 + int(k[0])*7 + int(k[n-1])*31) & (fieldTableSize - 1)
}

func (t *fieldTable) add(name string, slot int) {
	for i := fieldHash([]byte(name)); ; i = (i + 1) & (fieldTableSize - 1) {
		if t.slots[i] == 0 {
			t.names[i], t.slots[i] = name, slot+1
			return
		}
		if t.names[i] == name {
			t.slots[i] = slot + 1 // the last mapping wins, as with a map
			return
		}
	}
}

// lookup returns k's slot, or -1.
func (t *fieldTable) lookup(k []byte) int {
	if len(k) == 0 {
		return -1
	}
	for i := fieldHash(k); ; i = (i + 1) & (fieldTableSize - 1) {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		if t.names[i] == string(k) {
			return s - 1
		}
	}
}
