package profile

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/ingest/jsonnum"
	"github.com/valyala/fastjson"
)

// Parser turns update objects into Updates. It keeps a fastjson parser
// between calls, so keep one per goroutine (or in a sync.Pool); the zero value
// is ready. Returned Updates never point into the Parser's memory.
type Parser struct {
	p fastjson.Parser
	// NoToken accepts updates without $token: warehouse imports know
	// their project from the import, not from each row.
	NoToken bool
}

// ParseUser parses one /engage update object.
func (ps *Parser) ParseUser(data []byte) (Update, error) { return ps.parse(data, User) }

// ParseGroup parses one /groups update object.
func (ps *Parser) ParseGroup(data []byte) (Update, error) { return ps.parse(data, Group) }

// ParseUser parses one /engage update with a fresh Parser.
func ParseUser(data []byte) (Update, error) {
	var ps Parser
	return ps.ParseUser(data)
}

// ParseGroup parses one /groups update with a fresh Parser.
func ParseGroup(data []byte) (Update, error) {
	var ps Parser
	return ps.ParseGroup(data)
}

func (ps *Parser) parse(data []byte, kind Kind) (Update, error) {
	if len(data) > MaxUpdateBytes {
		return Update{}, fieldErr(ErrTooLarge, "", "update is %d bytes; the limit is %d bytes (1 MB)", len(data), MaxUpdateBytes)
	}
	// fastjson is lenient on purpose (NaN, raw control characters, broken
	// escapes); the standard validator is not, and what we store must be
	// valid JSON for every later reader.
	if !utf8.Valid(data) {
		return Update{}, fieldErr(ErrInvalid, "", "invalid update: string should be valid utf8")
	}
	if !json.Valid(data) {
		return Update{}, fieldErr(ErrInvalid, "", "invalid update: not valid JSON")
	}
	v, err := ps.p.ParseBytes(data)
	if err != nil { // e.g. nesting deeper than fastjson allows
		return Update{}, fieldErr(ErrInvalid, "", "invalid update: %v", err)
	}
	obj, err := v.Object()
	if err != nil {
		return Update{}, fieldErr(ErrInvalid, "", "invalid update: must be a JSON object")
	}
	var f fields
	obj.Visit(f.take)
	if f.err != nil {
		return Update{}, f.err
	}
	return f.build(kind, ps.NoToken)
}

// fields collects the top-level members of one update. A repeated key keeps
// its last value, as JSON.parse does in the SDKs' own languages.
type fields struct {
	token, tokenAlt, distinct, groupKey, groupID *fastjson.Value
	ignoreTime, ignoreAlias, ip, time            *fastjson.Value
	op                                           Op
	opVal                                        *fastjson.Value
	err                                          error
}

func (f *fields) take(key []byte, v *fastjson.Value) {
	switch k := string(key); k {
	case "$token":
		f.token = v
	case "token":
		f.tokenAlt = v
	case "$distinct_id":
		f.distinct = v
	case "$group_key":
		f.groupKey = v
	case "$group_id":
		f.groupID = v
	case "$ignore_time":
		f.ignoreTime = v
	case "$ignore_alias":
		f.ignoreAlias = v
	case "$ip":
		f.ip = v
	case "$time":
		f.time = v
	default:
		// Other keys are ignored: SDKs add their own ($device_id, $user_id,
		// $latitude, $had_persisted_distinct_id, …).
		op := opByName(k)
		if op == 0 {
			return
		}
		if f.op != 0 && f.op != op && f.err == nil {
			f.err = invalid(k, "an update carries exactly one operation and this one already has "+f.op.String())
		}
		f.op, f.opVal = op, v
	}
}

func (f *fields) build(kind Kind, noToken bool) (Update, error) {
	u := Update{Kind: kind}
	var err error
	tok := f.token
	if tok == nil { // the Go SDK's older group payloads say "token"
		tok = f.tokenAlt
	}
	if tok != nil || !noToken {
		if u.Token, err = requiredString("$token", tok); err != nil {
			return Update{}, err
		}
	}
	if kind == User {
		if u.DistinctID, err = idText("$distinct_id", f.distinct); err != nil {
			return Update{}, err
		}
		if isPlaceholder(u.DistinctID) {
			return Update{}, invalid("$distinct_id", `"`+u.DistinctID+`" is a placeholder, not a user id`)
		}
	} else {
		if u.GroupKey, err = requiredString("$group_key", f.groupKey); err != nil {
			return Update{}, err
		}
		if u.GroupID, err = idText("$group_id", f.groupID); err != nil {
			return Update{}, err
		}
	}
	if u.IgnoreTime, err = boolish("$ignore_time", f.ignoreTime); err != nil {
		return Update{}, err
	}
	if u.IgnoreAlias, err = boolish("$ignore_alias", f.ignoreAlias); err != nil {
		return Update{}, err
	}
	if u.IP, err = ipText(f.ip); err != nil {
		return Update{}, err
	}
	if u.TimeMs, err = timeMs(f.time); err != nil {
		return Update{}, err
	}
	if f.op == 0 {
		return Update{}, fieldErr(ErrInvalid, "",
			"invalid update: no operation; expected one of $set, $set_once, $add, $union, $append, $remove, $unset, $delete")
	}
	if !kind.Supports(f.op) {
		return Update{}, fieldErr(ErrUnsupported, f.op.String(), "'%s' is not supported on %s profiles", f.op, kind)
	}
	u.Op = f.op
	switch u.Op {
	case OpUnset:
		u.Unset, err = unsetNames(f.opVal)
	case OpDelete:
		// The value is ignored: SDKs send "", "null" or null.
	default:
		u.Props, err = operands(u.Op, f.opVal)
	}
	if err != nil {
		return Update{}, err
	}
	return u, nil
}

// operands encodes the object of a property operation. All values share one
// arena; each Property keeps a capacity-limited slice of it.
func operands(op Op, v *fastjson.Value) ([]Property, error) {
	name := op.String()
	obj, err := v.Object()
	if err != nil {
		return nil, invalid(name, "must be an object of property names to values")
	}
	type span struct {
		name       string
		start, end int
	}
	var (
		arena []byte
		spans = make([]span, 0, obj.Len())
		pos   = make(map[string]int, obj.Len())
	)
	obj.Visit(func(key []byte, val *fastjson.Value) {
		if err != nil {
			return
		}
		k := truncateName(string(key))
		field := name + "." + k
		if k == "" {
			err = invalid(name, "property names must not be empty")
			return
		}
		start := len(arena)
		// $remove may still name a number out of range, to take out one
		// stored before the range was enforced.
		big := false
		check := &big
		if op == OpRemove {
			check = nil
		}
		switch {
		case op == OpAdd && val.Type() != fastjson.TypeNumber:
			err = invalid(field, "must be a number")
			return
		case op == OpUnion && val.Type() != fastjson.TypeArray:
			// A single value is a one-element list, as mixpanel-node sends it.
			arena = append(appendValue(append(arena, '['), val, check), ']')
		default:
			arena = appendValue(arena, val, check)
		}
		if big {
			err = invalid(field, jsonnum.Message)
			return
		}
		if n := len(arena) - start; n > MaxValueBytes {
			err = fieldErr(ErrTooLarge, field, "'%s' is %d bytes; a property value is limited to %d bytes", field, n, MaxValueBytes)
			return
		}
		if i, ok := pos[k]; ok {
			spans[i].start, spans[i].end = start, len(arena)
			return
		}
		pos[k] = len(spans)
		spans = append(spans, span{k, start, len(arena)})
	})
	if err != nil {
		return nil, err
	}
	props := make([]Property, len(spans))
	for i, s := range spans {
		props[i] = Property{Name: s.name, Value: arena[s.start:s.end:s.end]}
	}
	return props, nil
}

// unsetNames accepts the documented array of names and, like mixpanel-node
// before it wraps it, a single name.
func unsetNames(v *fastjson.Value) ([]string, error) {
	if v.Type() == fastjson.TypeString {
		return []string{truncateName(string(v.GetStringBytes()))}, nil
	}
	arr, err := v.Array()
	if err != nil {
		return nil, invalid("$unset", "must be an array of property names")
	}
	names := make([]string, len(arr))
	for i, e := range arr {
		if e.Type() != fastjson.TypeString {
			return nil, invalid(indexField("$unset", i), "must be a string")
		}
		names[i] = truncateName(string(e.GetStringBytes()))
	}
	return names, nil
}
