package record

import (
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/valyala/fastjson"
)

// Options says how to validate the records of one request.
type Options struct {
	Project int64
	// Token is the project's token; a $merge record that carries
	// properties.token must carry this one.
	Token string
	// AllowMerge is false when the caller authenticated with the project
	// token: $merge records then fail (field "event"). True means the
	// credential names the project, so a $merge needs no token.
	AllowMerge bool
	// Strict selects strict=1 validation (the default for /import JSON);
	// false is the lenient legacy mode that coerces where it can.
	Strict bool
	// Now is the server clock, for the time window and IngestMs. The zero
	// value means time.Now().
	Now time.Time
	// Canonical says the records come from Tributary's own encoders, which
	// write the shape the one-pass path (canonical.go) handles; it is
	// tried first for each record. Results are the same either way.
	Canonical bool
	// Mode is the project's ID management: Simplified derives distinct_id
	// from $user_id / $device_id, and each mode turns its identity events
	// into out.Changes. Zero: no identity handling (events as sent).
	Mode identity.Mode
	// CommonProps is how many properties every record also carries
	// through store.Batch.Common; they count toward the limit of 255.
	CommonProps int
	// UniqueNames says the encoder guarantees that each record's
	// top-level property names are distinct and none is time, distinct_id
	// or $insert_id (the warehouse mapper plans its names once per
	// schema), so the one-pass path skips the duplicate-key rule, a tenth
	// of its cost. The general path checks the rule regardless.
	UniqueNames bool
	// Vouched, when not nil, has one entry per record: what its encoder
	// checked while writing it (Vouch), which the one-pass path then
	// does not read again. Results are the same either way.
	Vouched []Vouch
	// Lend says the caller keeps the records, unchanged by anyone else,
	// until it has written the batch, and no longer needs their bytes as
	// JSON: the one-pass path then makes an event's Props out of its
	// record's own bytes (rewriting the comma before them into '{')
	// instead of copying them into the decoder's arena. For the
	// migration, whose records would otherwise be copied a second time:
	// the arena's pages, new for every job, were ~30 % of its page faults.
	// The identity strings are copied still: a store may keep them.
	Lend bool
}

// Failure is one item of the 400 body's failed_records.
type Failure struct {
	Index    int    `json:"index"`
	InsertID string `json:"insert_id"`
	Field    string `json:"field"`
	Message  string `json:"message"`
}

// Decoder validates and normalises records. It is meant to be reused across
// requests by one goroutine at a time (keep it in a sync.Pool): it owns a
// fastjson parser and an arena for the Props bytes, which both reach a steady
// size and then stop allocating. The zero value is ready to use.
type Decoder struct {
	p      fastjson.Parser
	sc     scanner
	fixed  []byte   // record copy when lone surrogates had to be marked
	arena  []byte   // Props of the current Decode
	num    []byte   // raw text of a number
	top    []member // members of the current record
	props  []member // members of its properties object
	seen   keySet
	names  map[string]string // interned event names: few distinct per batch
	strs   []byte            // backing store of kept strings; see keep
	maxRec int               // largest record parsed since Reset

	// State of the record being decoded.
	strict    bool
	checkUTF8 bool   // the scanner saw bad UTF-8: check every string
	escapes   bool   // the scanner saw a backslash: escape output strings
	inEvent   bool   // strings belong to the event name, not a property
	where     string // top-level property being walked, for field names
	insertID  *fastjson.Value
	bad       verdict
	idx       int // index of the record being decoded, for Change.Ref
	canon     canonScan
	canonHits int // records the canonical path took, for tests
}

type member struct {
	k string
	v *fastjson.Value
}

// verdict is the first violation found in a record.
type verdict struct{ field, msg string }

// fields are the members the rules look at; nil when absent. For repeated
// keys the first occurrence counts (strict mode fails the record anyway).
type fields struct {
	event, props, time, distinctID, altDistinctID, insertID, distinctIDs, token *fastjson.Value
	unknown, dup                                                                string
	hasUnknown, hasDup                                                          bool
	ids                                                                         idFields
}

// Decode validates recs[i] and appends each valid event to out.Events and
// each valid $merge record to out.Merges, in order; it sets out.Project. It
// returns one Failure per invalid record, in index order (nil when all are
// valid). Props slices point into the Decoder's arena and stay valid until
// the next Decode or Reset; the strings in the records are ordinary copies.
func (d *Decoder) Decode(opt Options, recs [][]byte, out *store.Batch) []Failure {
	d.arena = d.arena[:0]
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	out.Project = opt.Project
	out.Events = slices.Grow(out.Events, len(recs))
	var fails []Failure
	canon, nowMs := opt.Canonical && opt.Strict, opt.Now.UnixMilli()
	var vouch *Vouch
	for i, rec := range recs {
		d.idx = i
		if i < len(opt.Vouched) {
			vouch = &opt.Vouched[i]
		}
		if canon && d.canonical(&opt, rec, nowMs, out, vouch) {
			d.canonHits++
			continue
		}
		if d.record(&opt, rec, out) {
			continue
		}
		f := Failure{Index: i, Field: d.bad.field, Message: d.bad.msg}
		if d.insertID != nil && d.insertID.Type() == fastjson.TypeString {
			f.InsertID = sanitize(b2s(d.insertID.GetStringBytes()))
		}
		fails = append(fails, f)
	}
	return fails
}

// CanonicalHits is how many records the one-pass path for canonical records
// (Options.Canonical) has taken since the Decoder was made.
func (d *Decoder) CanonicalHits() int { return d.canonHits }

// Reset releases the previous Decode's Props and drops buffers that an
// unusually large request grew, so a pooled Decoder does not pin them.
func (d *Decoder) Reset() {
	d.arena = d.arena[:0]
	clear(d.canon.keys) // they point into the last records
	d.canon = canonScan{keys: d.canon.keys[:0]}
	if cap(d.arena) > 16<<20 {
		d.arena = nil
	}
	if d.maxRec > 64<<10 {
		d.p, d.fixed, d.maxRec = fastjson.Parser{}, nil, 0
	}
	d.insertID = nil
}

func (d *Decoder) fail(field, msg string) bool {
	d.bad = verdict{field, msg}
	return false
}

// record validates one record and appends it to out when valid.
func (d *Decoder) record(opt *Options, rec []byte, out *store.Batch) bool {
	d.insertID, d.bad, d.inEvent, d.where = nil, verdict{}, false, ""
	d.maxRec = max(d.maxRec, len(rec))
	if err := d.sc.scan(rec); err != nil {
		return d.fail("", "invalid JSON: "+err.Error())
	}
	if d.sc.lone {
		d.fixed = fixSurrogates(d.fixed[:0], rec)
		rec = d.fixed
	}
	v, err := d.p.ParseBytes(rec)
	if err != nil { // cannot happen after scan; kept so a fastjson change cannot panic us
		return d.fail("", "invalid JSON: "+err.Error())
	}
	obj, err := v.Object()
	if err != nil {
		return d.fail("", `invalid record: must be a JSON object with "event" and "properties"`)
	}
	d.strict, d.checkUTF8, d.escapes = opt.Strict, d.sc.badUTF8, d.sc.escapes

	var f fields
	d.locate(obj, &f)
	if d.strict && f.hasUnknown {
		k := sanitize(f.unknown)
		return d.fail(k, "'"+k+`' is not a valid field: a record has only "event" and "properties"`)
	}
	if d.strict && f.hasDup {
		return d.fail(f.dup, "'"+f.dup+"' is invalid: duplicate key")
	}
	name, ok := d.eventName(f.event)
	if !ok {
		return false
	}
	if f.props == nil || f.props.Type() != fastjson.TypeObject {
		// Legacy SDKs may omit properties; an empty object is the sane value.
		if d.strict || (f.props != nil && f.props.Type() != fastjson.TypeNull) {
			return d.fail("properties", "'properties' is invalid: must be an object")
		}
	}
	if len(d.props)+opt.CommonProps > maxMembers {
		k := "properties"
		if i := max(maxMembers-opt.CommonProps, 0); i < len(d.props) {
			k += "." + sanitize(d.props[i].k)
		}
		return d.fail(k, "'properties' is invalid: an event must have fewer than 255 properties")
	}
	nowMs := opt.Now.UnixMilli()
	if name == "$merge" {
		return d.merge(opt, &f, nowMs, out)
	}
	return d.event(opt, &f, name, nowMs, out)
}

// locate collects the record's members and picks out the ones the rules use.
func (d *Decoder) locate(obj *fastjson.Object, f *fields) {
	d.top = collect(obj, d.top[:0])
	for _, m := range d.top {
		switch m.k {
		case "event":
			f.dup, f.hasDup = firstOr(&f.event, m, f.dup, f.hasDup)
		case "properties":
			f.dup, f.hasDup = firstOr(&f.props, m, f.dup, f.hasDup)
		default:
			if !f.hasUnknown {
				f.unknown, f.hasUnknown = m.k, true
			}
		}
	}
	d.props = d.props[:0]
	if f.props == nil || f.props.Type() != fastjson.TypeObject {
		return
	}
	o, _ := f.props.Object()
	d.props = collect(o, d.props)
	for _, m := range d.props {
		var slot **fastjson.Value
		switch m.k {
		case "time":
			slot = &f.time
		case "distinct_id":
			slot = &f.distinctID
		case "$distinct_id":
			slot = &f.altDistinctID
		case "$insert_id":
			slot = &f.insertID
		case "$distinct_ids":
			slot = &f.distinctIDs
		case "token":
			slot = &f.token
		default:
			if slot = f.ids.slot(m.k); slot == nil {
				continue
			}
		}
		if *slot == nil {
			*slot = m.v
		}
	}
	d.insertID = f.insertID
}

// firstOr stores m in *slot if it is empty and otherwise remembers the first
// duplicated key.
func firstOr(slot **fastjson.Value, m member, dup string, hasDup bool) (string, bool) {
	if *slot == nil {
		*slot = m.v
		return dup, hasDup
	}
	if !hasDup {
		return sanitize(m.k), true
	}
	return dup, hasDup
}

// collect appends the members of o in order. fastjson offers only Visit; a
// slice lets the rules look members up and walk them without closures.
func collect(o *fastjson.Object, dst []member) []member {
	o.Visit(func(k []byte, v *fastjson.Value) {
		dst = append(dst, member{b2s(k), v})
	})
	return dst
}

const msgEvent = "'event' is invalid: must be a non-empty string"

func (d *Decoder) eventName(v *fastjson.Value) (string, bool) {
	if v == nil || v.Type() != fastjson.TypeString || len(v.GetStringBytes()) == 0 {
		return "", d.fail("event", msgEvent)
	}
	d.inEvent = true
	s, ok := d.text(b2s(v.GetStringBytes()))
	d.inEvent = false
	if !ok {
		return "", false
	}
	if s, ok = d.ident("event", s); !ok {
		return "", false
	}
	return d.intern(s), true
}

// intern returns a stable copy of an event name, shared by every event of
// that name, which saves an allocation per event.
func (d *Decoder) intern(s string) string {
	if c, ok := d.names[s]; ok {
		return c
	}
	if d.names == nil || len(d.names) >= 1024 {
		d.names = make(map[string]string)
	}
	c := strings.Clone(s)
	d.names[c] = c
	return c
}

// keep returns a copy of s that outlives the parser. Copies are packed into
// shared chunks to save an allocation per id; a chunk is only ever appended
// to, never rewritten or reused, so the strings handed out stay immutable,
// and the GC frees a chunk once no string points into it.
func (d *Decoder) keep(s string) string {
	if len(s) == 0 {
		return ""
	}
	if cap(d.strs)-len(d.strs) < len(s) {
		d.strs = make([]byte, 0, max(len(s), 16<<10))
	}
	start := len(d.strs)
	d.strs = append(d.strs, s...)
	return unsafe.String(&d.strs[start], len(s))
}

// event applies the rules of an ordinary event and appends it.
func (d *Decoder) event(opt *Options, f *fields, name string, nowMs int64, out *store.Batch) bool {
	ms, ok := d.timeMs(f.time, nowMs, true)
	if !ok {
		return false
	}
	var did, user, device string
	derived := false
	if opt.Mode == identity.Simplified {
		did, user, device, derived = d.simplifiedID(f)
	}
	if !derived {
		if opt.Mode == identity.Original && name == "$identify" && f.distinctID == nil && f.altDistinctID == nil {
			// distinct_id is optional on $identify: it is the identified id.
			f.distinctID = f.ids.identifiedID
		}
		if did, ok = d.distinctID(f); !ok {
			return false
		}
	}
	iid, ok := d.insertIDValue(f.insertID)
	if !ok {
		return false
	}
	props, ok := d.emitProps(false)
	if !ok {
		return false
	}
	// Last check: the change refers to the event about to be appended.
	if !d.identityChange(opt, f, name, did, user, device, out) {
		return false
	}
	ev := store.Event{Name: name, DistinctID: did, TimeMs: ms, InsertID: iid, Props: props, IngestMs: nowMs}
	if iid != "" {
		ev.Key = store.DedupKey(opt.Project, name, did, ms, iid)
	}
	out.Events = append(out.Events, ev)
	return true
}
