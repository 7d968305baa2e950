package identity

import (
	"fmt"
	"strings"
)

// merge joins the clusters of a and b; $merge has no further conditions.
func (g *Graph) merge(a, b string) (bool, error) {
	if a == "" || b == "" {
		return false, fmt.Errorf("$merge %q %q: %w", a, b, ErrInvalidID)
	}
	if a == b {
		return false, nil
	}
	ra, sa := g.f.cluster(a)
	rb, sb := g.f.cluster(b)
	if ra >= 0 && ra == rb {
		return false, nil
	}
	if sa+sb > MaxClusterSize {
		return false, &ClusterLimitError{A: a, B: b, SizeA: sa, SizeB: sb}
	}
	ia, ib := g.f.add(a), g.f.add(b)
	g.f.union(g.f.find(ia), g.f.find(ib))
	return true, nil
}

// identify merges the anonymous id into the identified user's cluster, only
// when the anonymous id is anonymous (isAnonymous) and no other
// $identified_id has claimed it.
func (g *Graph) identify(user, anon string) (bool, error) {
	if user == "" || anon == "" {
		return false, fmt.Errorf("$identify %q %q: %w", user, anon, ErrInvalidID)
	}
	if !isAnonymous(anon) {
		return false, fmt.Errorf("$identify %q with $anon_id %q: %w", user, anon, ErrNotUUIDv4)
	}
	if user == anon {
		return false, nil
	}
	ru, su := g.f.cluster(user)
	ra, sa := g.f.cluster(anon)
	if ra >= 0 && ra == ru {
		// Already one user (e.g. through $merge): the event still says
		// which id is the identified one.
		iu, _ := g.f.lookup(user)
		if g.f.ident[iu] {
			return false, nil
		}
		g.markIdentified(iu)
		return true, nil
	}
	// A cluster holds an identified id exactly when its canonical id is one.
	if ra >= 0 && g.f.ident[g.f.canon[ra]] {
		return false, fmt.Errorf("$identify %q with $anon_id %q (merged with %q): %w",
			user, anon, g.f.names[g.f.canon[ra]], ErrAnonMerged)
	}
	if su+sa > MaxClusterSize {
		return false, &ClusterLimitError{A: user, B: anon, SizeA: su, SizeB: sa}
	}
	iu, ia := g.f.add(user), g.f.add(anon)
	g.markIdentified(iu)
	g.f.union(g.f.find(iu), g.f.find(ia))
	return true, nil
}

// markIdentified flags i and lets it become its cluster's canonical id if
// it now beats the current one.
func (g *Graph) markIdentified(i int32) {
	g.f.ident[i] = true
	r := g.f.find(i)
	g.f.canon[r] = g.f.better(g.f.canon[r], i)
}

// createAlias makes alias another id of distinctID's user. One alias maps to
// one distinct_id, for good; many aliases may map to one id, and an alias
// may itself be aliased (chains).
func (g *Graph) createAlias(alias, distinctID string) (bool, error) {
	if alias == "" || distinctID == "" {
		return false, fmt.Errorf("$create_alias %q -> %q: %w", alias, distinctID, ErrInvalidID)
	}
	if alias == distinctID {
		return false, nil
	}
	if ia, ok := g.f.lookup(alias); ok {
		if t, ok := g.alias[ia]; ok {
			if g.f.names[t] == distinctID {
				return false, nil
			}
			return false, fmt.Errorf("$create_alias %q -> %q (already -> %q): %w",
				alias, distinctID, g.f.names[t], ErrAliasTaken)
		}
	}
	rd, sd := g.f.cluster(distinctID)
	ra, sa := g.f.cluster(alias)
	same := ra >= 0 && ra == rd
	if !same && sa+sd > MaxClusterSize {
		return false, &ClusterLimitError{A: alias, B: distinctID, SizeA: sa, SizeB: sd}
	}
	// The existing id registers first, so it stays canonical when both are new.
	id, ia := g.f.add(distinctID), g.f.add(alias)
	if !same {
		g.f.union(g.f.find(id), g.f.find(ia))
	}
	if g.alias == nil {
		g.alias = make(map[int32]int32)
	}
	g.alias[ia] = id
	return true, nil
}

// isAnonymous reports whether $identify may merge id as an anonymous id:
// a UUIDv4 (the HTTP API's rule), or a "$device:" id, which the SDKs
// (mixpanel-browser, the mobile SDKs) make for every anonymous user and
// send as $anon_distinct_id. Both are ids no one chose, so merging them
// cannot join two real users.
func isAnonymous(id string) bool {
	if rest, ok := strings.CutPrefix(id, DevicePrefix); ok {
		return rest != ""
	}
	return isUUIDv4(id)
}

// isUUIDv4 accepts the canonical 8-4-4-4-12 hex form (either case) with
// version 4 and the RFC 4122 variant.
func isUUIDv4(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	v := s[19] | 0x20 // lower case
	return s[14] == '4' && (v == '8' || v == '9' || v == 'a' || v == 'b')
}
