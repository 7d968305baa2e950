// Package identity models identity merge for both ID management modes: which
// distinct_ids are one user, and which of them is the canonical id that reads
// (queries, exports) use.
//
// A Graph holds one project's state. Every accepted change is a Change
// record; a store persists those records and rebuilds the Graph by replaying
// them (Replay), so the Graph itself never needs to be serialised. Applying
// the same records in the same order always yields the same state, including
// the choice of canonical ids:
//
//   - Simplified ID Merge: the canonical id of a cluster is its $user_id;
//     a device that was never linked resolves to "$device:<id>".
//   - Original ID Merge: the first id of the cluster to be registered wins,
//     except that an id used as $identified_id of an accepted $identify beats
//     every id that never was (so identified users keep their own id). Ids
//     are registered in the order of the accepted changes, the two ids of a
//     change in argument order: Merge(a, b) registers a first,
//     CreateAlias(alias, id) registers id first, Identify(user, anon) user
//     first.
//
// The package is pure and deterministic; it neither reads clocks nor does I/O.
package identity

import (
	"fmt"
	"strings"

	"github.com/tributary-dev/tributary/internal/config"
)

const (
	// MaxClusterSize bounds an Original ID Merge cluster: "at most 500
	// distinct_ids per cluster; a merge that would exceed 500 fails".
	MaxClusterSize = 500
	// DevicePrefix turns a $device_id into a distinct_id in Simplified mode.
	DevicePrefix = "$device:"
)

// Mode is a project's ID management system. It is the configuration's own
// enum (config.IDManagement), so a project has one representation of it
// from the YAML to the graph; the graph only accepts Original and
// Simplified (config.Project.IDMode resolves the unset default).
type Mode = config.IDManagement

const (
	Original   = config.IDOriginal
	Simplified = config.IDSimplified
)

// ParseMode reads the configuration spelling of a mode.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "original":
		return Original, nil
	case "simplified":
		return Simplified, nil
	}
	return "", fmt.Errorf("identity: unknown ID management mode %q: want original or simplified", s)
}

// Graph is the identity state of one project.
//
// It is not safe for concurrent use. Resolve, ClusterSize, Len and Changes
// never write, so any number of them may run together while no Apply runs
// (a sync.RWMutex with Apply under the write lock is enough).
type Graph struct {
	mode    Mode
	f       forest
	alias   map[int32]int32 // Original: alias → the distinct_id it was created for
	changes int
	key     []byte // scratch for a lookup (link)
}

// New returns an empty Graph. It panics on a Mode other than Original or
// Simplified, which is a programming error (configuration is validated
// before).
func New(mode Mode) *Graph {
	if mode != Original && mode != Simplified {
		panic(fmt.Sprintf("identity.New: invalid mode %v", mode))
	}
	return &Graph{mode: mode}
}

// Mode returns the Graph's ID management mode.
func (g *Graph) Mode() Mode { return g.mode }

// Len is the number of ids the Graph knows: ids that took part in an
// accepted change. Every other id is a cluster of its own.
func (g *Graph) Len() int { return len(g.f.names) }

// Changes is the number of accepted changes applied so far, i.e. the length
// of the change log that reproduces this state.
func (g *Graph) Changes() int { return g.changes }

// Resolve returns the canonical id of id's cluster; an id the Graph does not
// know is its own canonical id. Reads call it for every distinct_id they
// show, so merges apply retroactively to events stored before them.
func (g *Graph) Resolve(id string) string {
	i, ok := g.f.lookup(id)
	if !ok {
		return id
	}
	return g.f.names[g.f.canon[g.f.root(i)]]
}

// ClusterSize is the number of ids in id's cluster (1 for an unknown id).
func (g *Graph) ClusterSize(id string) int {
	i, ok := g.f.lookup(id)
	if !ok {
		return 1
	}
	return int(g.f.size[g.f.root(i)])
}

// Apply applies one change. changed is false when the change is valid but
// already holds (nothing to log); a refusal returns an error wrapping one of
// the Err* values and leaves the Graph untouched. Log exactly the changes
// for which changed is true: replaying them rebuilds this state.
func (g *Graph) Apply(c Change) (changed bool, err error) {
	return g.apply(c, true)
}

// ApplyBare is Apply for callers that only tell refusals apart (errors.Is):
// a device already linked to another user is refused with the bare
// ErrDeviceLinked, naming no ids, so the refusal allocates nothing. The
// stores apply a change per event, and a migration whose devices changed
// hands had most of its events refused that way (≈ 1 % of its CPU went to
// allocating the errors).
func (g *Graph) ApplyBare(c Change) (changed bool, err error) {
	return g.apply(c, false)
}

func (g *Graph) apply(c Change, detail bool) (changed bool, err error) {
	switch {
	case c.Kind == KindLink && g.mode == Simplified:
		changed, err = g.link(c.A, c.B, detail)
	case c.Kind == KindMerge && g.mode == Original:
		changed, err = g.merge(c.A, c.B)
	case c.Kind == KindIdentify && g.mode == Original:
		changed, err = g.identify(c.A, c.B)
	case c.Kind == KindAlias && g.mode == Original:
		changed, err = g.createAlias(c.A, c.B)
	case c.Kind >= KindMerge && c.Kind <= KindLink:
		return false, fmt.Errorf("%v in %v mode: %w", c.Kind, g.mode, ErrWrongMode)
	default:
		return false, fmt.Errorf("identity: unknown change kind %d: %w", c.Kind, ErrCorruptLog)
	}
	if changed {
		g.changes++
	}
	return changed, err
}

// Merge applies a $merge of two distinct_ids (Original mode).
func (g *Graph) Merge(a, b string) (bool, error) {
	return g.Apply(Change{Kind: KindMerge, A: a, B: b})
}

// Identify applies an $identify event (Original mode).
func (g *Graph) Identify(identifiedID, anonID string) (bool, error) {
	return g.Apply(Change{Kind: KindIdentify, A: identifiedID, B: anonID})
}

// CreateAlias applies a $create_alias event: alias becomes another id of
// distinctID's user (Original mode).
func (g *Graph) CreateAlias(alias, distinctID string) (bool, error) {
	return g.Apply(Change{Kind: KindAlias, A: alias, B: distinctID})
}

// Link applies an event that carries both $user_id and $device_id
// (Simplified mode).
func (g *Graph) Link(userID, deviceID string) (bool, error) {
	return g.Apply(Change{Kind: KindLink, A: userID, B: deviceID})
}

// Replay rebuilds a Graph from its change log.
func Replay(mode Mode, log []Change) (*Graph, error) {
	g := New(mode)
	g.f.grow(len(log)) // most changes bring new ids; every link brings its device
	for i, c := range log {
		changed, err := g.Apply(c)
		if err == nil && !changed {
			err = fmt.Errorf("%v %q %q changes nothing", c.Kind, c.A, c.B)
		}
		if err != nil {
			return nil, fmt.Errorf("identity: replaying change %d: %w (%w)", i, ErrCorruptLog, err)
		}
	}
	return g, nil
}
