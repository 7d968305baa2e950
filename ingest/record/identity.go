package record

import (
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Identity fields of an event, found by locate.
type idFields struct {
	userID, deviceID, identifiedID, anonID, anonDistinctID, alias *fastjson.Value
}

func (f *idFields) slot(key string) **fastjson.Value {
	switch key {
	case "$user_id":
		return &f.userID
	case "$device_id":
		return &f.deviceID
	case "$identified_id":
		return &f.identifiedID
	case "$anon_id":
		return &f.anonID
	case "$anon_distinct_id":
		return &f.anonDistinctID
	case "alias":
		return &f.alias
	}
	return nil
}

// idString returns a non-empty string value, or "" when v is absent or
// not a usable id. Numbers are accepted as their text: SDKs send numeric
// user ids.
func (d *Decoder) idString(v *fastjson.Value) string {
	switch {
	case v == nil:
		return ""
	case v.Type() == fastjson.TypeString:
		s := b2s(v.GetStringBytes())
		// Not usable as an id (then the event's distinct_id counts):
		// placeholders, bad UTF-8, and NUL, which PostgreSQL text refuses.
		if isPlaceholder(s) || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return ""
		}
		return d.keep(s)
	case v.Type() == fastjson.TypeNumber:
		return d.keep(string(v.MarshalTo(nil)))
	}
	return ""
}

// simplifiedID derives a Simplified ID Merge event's distinct_id from
// $user_id, else "$device:" + $device_id (decisions.md); ok is false when
// the event has neither, and the distinct_id it carries counts.
func (d *Decoder) simplifiedID(f *fields) (did, user, device string, ok bool) {
	user, device = d.idString(f.ids.userID), d.idString(f.ids.deviceID)
	switch {
	case user != "":
		return user, user, device, true
	case device != "":
		return identity.DevicePrefix + device, "", device, true
	}
	return "", "", "", false
}

// identityChange appends the identity change an event carries, if any:
// in Original mode $identify and $create_alias, in Simplified mode an
// event with both $user_id and $device_id. Records of the other mode are
// accepted and have no effect, as the public docs describe.
func (d *Decoder) identityChange(opt *Options, f *fields, name, did, user, device string, out *store.Batch) bool {
	c := store.Change{Event: len(out.Events), Ref: d.idx}
	switch {
	case opt.Mode == identity.Simplified && user != "" && device != "":
		c.Change = identity.Change{Kind: identity.KindLink, A: user, B: device}
	case opt.Mode == identity.Original && name == "$identify":
		// The HTTP API's shape names both ids ($identified_id, $anon_id);
		// the SDKs' (mixpanel-js, the mobile SDKs) sends the user as
		// distinct_id and the previous id as $anon_distinct_id.
		a, b := d.idString(f.ids.identifiedID), d.idString(f.ids.anonID)
		if a == "" && f.ids.identifiedID == nil {
			a = did
		}
		if b == "" && f.ids.anonID == nil {
			b = d.idString(f.ids.anonDistinctID)
		}
		if a == "" {
			return d.fail("properties.$identified_id", "'properties.$identified_id' is invalid: $identify needs the identified id in $identified_id or distinct_id")
		}
		if b == "" {
			return d.fail("properties.$anon_id", "'properties.$anon_id' is invalid: $identify needs the anonymous id in $anon_id or $anon_distinct_id")
		}
		c.Change = identity.Change{Kind: identity.KindIdentify, A: a, B: b}
	case opt.Mode == identity.Original && name == "$create_alias":
		a := d.idString(f.ids.alias)
		if a == "" {
			return d.fail("properties.alias", "'properties.alias' is invalid: $create_alias needs a non-empty string alias")
		}
		if did == "" {
			return d.fail("properties.distinct_id", "'properties.distinct_id' is invalid: $create_alias needs the distinct_id the alias is for")
		}
		if a == did {
			return d.fail("properties.alias", "'properties.alias' is invalid: an alias must differ from the distinct_id")
		}
		c.Change = identity.Change{Kind: identity.KindAlias, A: a, B: did}
	default:
		return true
	}
	out.Changes = append(out.Changes, c)
	return true
}
