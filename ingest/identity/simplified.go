package identity

import (
	"fmt"
	"strings"
)

// DistinctID is the distinct_id Simplified ID Merge gives an event: its
// $user_id, else "$device:" + its $device_id ("" when it has neither).
func DistinctID(userID, deviceID string) string {
	if userID != "" {
		return userID
	}
	if deviceID != "" {
		return DevicePrefix + deviceID
	}
	return ""
}

// SplitDistinctID reads an event that carries only distinct_id, as
// Simplified mode does for backward compatibility: a "$device:" prefix marks
// a device id, anything else is a user id.
func SplitDistinctID(distinctID string) (userID, deviceID string) {
	if d, ok := strings.CutPrefix(distinctID, DevicePrefix); ok {
		return "", d
	}
	return distinctID, ""
}

// link attaches the device to the user the first time an event carries
// both. Users never merge with each other, so a cluster is one user and its
// devices; a device keeps its first user for good.
func (g *Graph) link(user, device string, detail bool) (bool, error) {
	if user == "" || device == "" || strings.HasPrefix(user, DevicePrefix) {
		return false, fmt.Errorf("link $user_id %q with $device_id %q: %w", user, device, ErrInvalidID)
	}
	// Most events come from a device already linked: look it up without
	// making its name a string.
	g.key = append(append(g.key[:0], DevicePrefix...), device...)
	if id, ok := g.f.ids[string(g.key)]; ok {
		owner := g.f.names[g.f.canon[g.f.find(id)]]
		switch {
		case owner == user:
			return false, nil
		case !detail:
			return false, ErrDeviceLinked
		}
		return false, &linkedError{user, device, owner}
	}
	iu, id := g.f.add(user), g.f.add(string(g.key))
	// Hang the device directly under the user's root: Resolve then takes
	// one step, and the user stays canonical whatever the sizes.
	r := g.f.find(iu)
	g.f.parent[id] = r
	g.f.size[r]++
	return true, nil
}

// linkedError is ErrDeviceLinked with its ids. Its message is built only
// when read: every event of a known device whose user changed is refused
// this way, and a migration's writes discard the error (≈ 1 % of their
// CPU went to formatting it).
type linkedError struct{ user, device, owner string }

func (e *linkedError) Error() string {
	return fmt.Sprintf("link $user_id %q with $device_id %q (linked to %q): %v", e.user, e.device, e.owner, ErrDeviceLinked)
}

func (e *linkedError) Unwrap() error { return ErrDeviceLinked }
