// Package profile parses /engage (user) and /groups (group) profile updates
// and applies them to stored profiles with Mixpanel's semantics.
//
// It is pure and storage-independent: an Update and a Profile are plain data
// (strings and compact JSON bytes) that a store can persist as it likes, and
// Apply is deterministic given the profile, the update and the clock value
// passed in.
package profile

// Limits documented for the profile APIs.
const (
	// MaxUpdateBytes bounds one update object ("each update at most 1 MB").
	MaxUpdateBytes = 1 << 20
	// MaxProperties bounds one profile ("2000 properties per profile").
	// $last_seen, which the service maintains itself, is not counted.
	MaxProperties = 2000
	// MaxValueBytes bounds one property value: the documented limit for list
	// and object values on profiles ("256 KB"), applied to every value.
	MaxValueBytes = 256 << 10
	// MaxNameRunes is the length to which property names are truncated, as
	// for event properties ("longer names are truncated").
	MaxNameRunes = 255
)

// LastSeen is the property that records when the profile was last updated.
const LastSeen = "$last_seen"

// Kind tells user profiles (/engage, keyed by distinct_id) from group
// profiles (/groups, keyed by group key and id).
type Kind uint8

const (
	User Kind = iota + 1
	Group
)

func (k Kind) String() string {
	switch k {
	case User:
		return "user"
	case Group:
		return "group"
	}
	return "unknown"
}

// Op is the single operation an update carries.
type Op uint8

const (
	OpSet     Op = iota + 1 // $set: replace values
	OpSetOnce               // $set_once: set only absent properties
	OpAdd                   // $add: add to numbers (users only)
	OpUnion                 // $union: add list values not yet present
	OpAppend                // $append: append one value to a list (users only)
	OpRemove                // $remove: remove every equal value from a list
	OpUnset                 // $unset: delete properties
	OpDelete                // $delete: delete the whole profile
)

// String returns the wire name, e.g. "$set_once".
func (o Op) String() string {
	switch o {
	case OpSet:
		return "$set"
	case OpSetOnce:
		return "$set_once"
	case OpAdd:
		return "$add"
	case OpUnion:
		return "$union"
	case OpAppend:
		return "$append"
	case OpRemove:
		return "$remove"
	case OpUnset:
		return "$unset"
	case OpDelete:
		return "$delete"
	}
	return "$unknown"
}

// opByName is the inverse of Op.String; 0 for a name that is no operation.
func opByName(name string) Op {
	for o := OpSet; o <= OpDelete; o++ {
		if o.String() == name {
			return o
		}
	}
	return 0
}

// Supports reports whether profiles of kind k accept op: group profiles have
// no $add and no $append.
func (k Kind) Supports(op Op) bool {
	if op < OpSet || op > OpDelete {
		return false
	}
	return k == User || (op != OpAdd && op != OpAppend)
}

// Property is one named value. Value is compact JSON.
type Property struct {
	Name  string
	Value []byte
}

// Update is one parsed profile update.
type Update struct {
	Kind  Kind
	Token string // $token (or "token", which older SDK group payloads send)

	DistinctID string // users: $distinct_id
	GroupKey   string // groups: $group_key, e.g. "company_id"
	GroupID    string // groups: $group_id (a JSON number is kept as its text)

	Op Op
	// Props are the operands of $set, $set_once, $add, $union, $append and
	// $remove, in payload order with unique names. $add values are JSON
	// numbers and $union values JSON arrays; the others are any JSON value.
	Props []Property
	// Unset names the properties of $unset.
	Unset []string

	// IgnoreTime ($ignore_time) leaves $last_seen alone.
	IgnoreTime bool
	// IgnoreAlias ($ignore_alias) asks the caller to apply the update to the
	// literal distinct_id instead of resolving it through identity merge.
	IgnoreAlias bool
	// IP is $ip as text: "" when absent, "0" for "do not geolocate". Geo
	// enrichment is the caller's business.
	IP string
	// TimeMs is $time in milliseconds since the epoch, 0 when absent.
	TimeMs int64
}
