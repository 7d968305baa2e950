package run

import (
	"bytes"
	"slices"

	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// A people or groups row sets the table's own columns (mr.fixed) and,
// with json_properties_column_name, whatever names its JSON object holds.
// The Mirror state remembers those JSON names per row, in the row's ref
// after the profile id, so a delete (or an update that drops one of
// them) unsets them too: re-deriving them would need the row, which a
// delete no longer has. Only the JSON names are kept (the table's
// columns are known from the schema), so a table without a JSON column
// stores the bare id, as before; a ref made before names were kept reads
// as an id without them.

// refSep separates a profile ref's id and names: profile ids and
// property names never hold NUL (the stores refuse it in text).
const refSep = 0

// profileRef is a people or groups row's ref: its profile id, then the
// names it set through its JSON column.
func profileRef(id string, names []string) []byte {
	b := []byte(id)
	for _, n := range names {
		b = append(append(b, refSep), n...)
	}
	return b
}

// parseProfileRef splits a ref made by profileRef.
func parseProfileRef(ref []byte) (id string, names []string) {
	i := bytes.IndexByte(ref, refSep)
	if i < 0 {
		return string(ref), nil
	}
	for _, n := range bytes.Split(ref[i+1:], []byte{refSep}) {
		names = append(names, string(n))
	}
	return string(ref[:i]), names
}

// jsonNames returns the names of props that are not the table's own
// columns (they came from the JSON column), sorted, or nil.
func (mr *mirrorRun) jsonNames(props []profile.Property) []string {
	var out []string
	for _, p := range props {
		if _, ok := mr.fixedAt[p.Name]; !ok {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// removalOf is removal for the profile a ref names: the table's
// properties and the JSON names the row set.
func (mr *mirrorRun) removalOf(kind profile.Kind, ref []byte) profile.Update {
	id, names := parseProfileRef(ref)
	u := mr.removal(kind, id)
	if u.Op == profile.OpUnset && len(names) > 0 {
		u.Unset = append(slices.Clone(mr.fixed), names...)
	}
	return u
}

// dropped returns the names of old (the JSON names the previous version
// of a row set) that set, the new version's, leaves out.
func dropped(old, set []string) []string {
	var out []string
	for _, n := range old {
		if _, found := slices.BinarySearch(set, n); !found {
			out = append(out, n)
		}
	}
	return out
}

// jsonRef records in refs the JSON names update u (of changed row
// u.Ref) sets, and returns those the row's previous version set on the
// same profile and this one no longer does: they are unset.
func (mr *mirrorRun) jsonRef(refs [][]byte, u store.ProfileUpdate) []string {
	k := u.Ref
	if k < 0 || k >= len(refs) || refs[k] == nil {
		return nil
	}
	id := string(refs[k])
	names := mr.jsonNames(u.Props)
	refs[k] = profileRef(id, names)
	oldID, old := parseProfileRef(mr.oldRef[mr.changed[k]])
	if oldID != id {
		return nil // the old profile was unset whole
	}
	return dropped(old, names)
}

// keepRefusedNames gives a changed row whose update was refused (it set
// nothing) the JSON names its previous version set on the same profile,
// which the profile still holds: a later delete unsets them.
func (mr *mirrorRun) keepRefusedNames(refs [][]byte) {
	set := make([]bool, len(refs))
	for _, u := range mr.sets.Profiles {
		if u.Ref >= 0 && u.Ref < len(set) {
			set[u.Ref] = true
		}
	}
	for k, ref := range refs {
		if set[k] || ref == nil {
			continue
		}
		old := mr.oldRef[mr.changed[k]]
		if id, names := parseProfileRef(old); len(names) > 0 && id == string(ref) {
			refs[k] = old
		}
	}
}
