package identity

import "slices"

// forest is a union-find over ids interned as int32: one map lookup per
// string, then arithmetic on small slices, which keeps millions of ids cheap
// (about 70 bytes each beyond the string itself).
type forest struct {
	ids    map[string]int32
	names  []string // index → id
	parent []int32
	size   []int32 // cluster size, valid at roots
	canon  []int32 // canonical member, valid at roots
	ident  []bool  // Original mode: was the $identified_id of an accepted $identify
}

func (f *forest) lookup(name string) (int32, bool) {
	i, ok := f.ids[name]
	return i, ok
}

// grow makes room for n more ids, so that rebuilding a large graph does not
// rehash its map over and over.
func (f *forest) grow(n int) {
	if f.ids == nil {
		f.ids = make(map[string]int32, n)
	}
	f.names = slices.Grow(f.names, n)
	f.parent = slices.Grow(f.parent, n)
	f.size = slices.Grow(f.size, n)
	f.canon = slices.Grow(f.canon, n)
	f.ident = slices.Grow(f.ident, n)
}

// add interns name, as a cluster of its own if new. Indices grow in order of
// first registration, which is what "first seen" means for canonical ids.
func (f *forest) add(name string) int32 {
	if i, ok := f.ids[name]; ok {
		return i
	}
	if f.ids == nil {
		f.ids = make(map[string]int32)
	}
	i := int32(len(f.names))
	f.ids[name] = i
	f.names = append(f.names, name)
	f.parent = append(f.parent, i)
	f.size = append(f.size, 1)
	f.canon = append(f.canon, i)
	f.ident = append(f.ident, false)
	return i
}

// root finds i's root without writing, so that readers never race with each
// other; union by size keeps paths O(log n) even without compression.
func (f *forest) root(i int32) int32 {
	for f.parent[i] != i {
		i = f.parent[i]
	}
	return i
}

// find is root plus path compression, for writers.
func (f *forest) find(i int32) int32 {
	r := f.root(i)
	for f.parent[i] != r {
		i, f.parent[i] = f.parent[i], r
	}
	return r
}

// cluster returns the root and size of name's cluster; -1 and 1 for an id
// never seen, which is a cluster of one that does not exist yet.
func (f *forest) cluster(name string) (root int32, size int) {
	i, ok := f.ids[name]
	if !ok {
		return -1, 1
	}
	r := f.find(i)
	return r, int(f.size[r])
}

// union joins two distinct roots under the larger one and gives the result
// the canonical member chosen by better.
func (f *forest) union(ra, rb int32) int32 {
	if f.size[ra] < f.size[rb] {
		ra, rb = rb, ra
	}
	f.parent[rb] = ra
	f.size[ra] += f.size[rb]
	f.canon[ra] = f.better(f.canon[ra], f.canon[rb])
	return ra
}

// better picks the canonical id of a merged cluster: an identified id beats
// an anonymous one, then the id seen first wins. Both sides are already the
// best of their cluster, so the rule holds for the whole cluster.
func (f *forest) better(a, b int32) int32 {
	if f.ident[a] != f.ident[b] {
		if f.ident[a] {
			return a
		}
		return b
	}
	return min(a, b)
}
