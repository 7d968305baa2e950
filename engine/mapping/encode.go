package mapping

import (
	"math"
	"strconv"
	"unsafe"

	"github.com/zeebo/xxh3"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/record"
)

// Map appends one record per row of rec to out; rows that cannot be mapped
// become out.Errs (Row is the batch row) and no record.
func (m *Mapper) Map(rec arrow.RecordBatch, out *Records) {
	for i := range m.roots {
		m.roots[i].bind(rec.Column(i))
	}
	for p := range m.props {
		l := &m.props[p]
		l.nullable = m.mayBeNull(l)
		l.float = l.path == nil && l.enc.kind == kFloat && l.enc.f64 != nil
	}
	out.Common, out.UniqueNames = m.common, m.uniqueNames
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		start := len(out.Buf)
		var ks, ke int
		var err *RowError
		switch m.typ {
		case importspec.EventStream:
			out.Buf, ks, ke, err = m.event1(out.Buf, i)
		default:
			out.Buf, ks, ke, err = m.profile1(out.Buf, i)
		}
		if err != nil {
			out.Buf = out.Buf[:start]
			err.Row = int64(i)
			out.Errs = append(out.Errs, *err)
			continue
		}
		out.Ends = append(out.Ends, len(out.Buf))
		out.Rows = append(out.Rows, int32(i))
		out.keys = append(out.keys, ks, ke)
		if m.typ == importspec.EventStream {
			v := m.head
			if m.clean && m.members < record.MaxCleanMembers {
				v.Rest, v.Members = true, int16(m.members)
			}
			out.Vouched = append(out.Vouched, v)
		}
	}
}

func colErr(col, msg string) *RowError { return &RowError{Column: col, Message: msg} }

func (m *Mapper) colName(i int) string {
	return m.plans[i].Column
}

// text returns column c's value at row i as an identifier string (strings
// as they are, integers in decimal); ok is false for NULL or other types.
func (m *Mapper) text(c, i int) (string, bool) {
	if v := &m.roots[c]; v.offs != nil && v.valid == nil { // a plain string column
		return v.data[v.offs[i]:v.offs[i+1]], true
	}
	return m.textSlow(c, i)
}

// wide reports whether s lies in column c's string data with sixteen bytes
// readable from its start (see appendStringWide).
func (m *Mapper) wide(c int, s string) bool {
	d := m.roots[c].data
	off := uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(unsafe.StringData(d)))
	return len(d) > 0 && off+16 <= uintptr(len(d)) // off wraps around when s is elsewhere
}

func (m *Mapper) textSlow(c, i int) (string, bool) {
	v := &m.roots[c]
	if v.isNull(i) {
		return "", false
	}
	switch v.kind {
	case kString:
		return v.str(i), true
	case kInt, kUint, kDecimal:
		start := len(m.scratch)
		m.scratch = v.appendValue(m.scratch, i)
		return b2s(m.scratch[start:]), true
	case kDict:
		if v.elem.kind == kString {
			return v.elem.str(int(v.ints(i))), true
		}
	}
	return "", false
}

func (m *Mapper) event1(dst []byte, i int) ([]byte, int, int, *RowError) {
	m.scratch = m.scratch[:0]
	recStart := len(dst)
	dst = append(dst, `{"event":`...)
	h := &m.head // what the record's head is vouched for (vouch.go)
	*h = record.Vouch{Head: true}
	if m.event >= 0 {
		name, ok := m.text(m.event, i)
		if !ok || name == "" {
			return dst, 0, 0, colErr(m.colName(m.event), "event name is NULL or empty")
		}
		n := len(dst)
		dst = appendStringWide(dst, name, m.wide(m.event, name))
		h.Head, h.NameLen = cleanText(name, len(dst)-n), uint16(len(name))
	} else {
		dst = append(dst, m.staticEvent...)
		h.Head, h.NameLen = m.staticClean, uint16(len(m.staticEvent)-2)
	}
	ms, rerr := timeMs(&m.roots[m.tm], i)
	if rerr != "" {
		return dst, 0, 0, colErr(m.colName(m.tm), rerr)
	}
	dst = append(dst, `,"properties":{"time":`...)
	t := len(dst)
	dst = appendInt(dst, ms)
	h.TimeMs, h.TimeLen = ms, uint8(len(dst)-t)
	h.Head = h.Head && ms >= record.MinHeadTimeMs
	dst = append(dst, `,"distinct_id":`...)
	didAt := len(dst) // the opening quote
	var user, device string
	var hasUser, hasDevice bool
	var idAt0, idEnd0 int // the escaped user (or device, opening quote dropped) written as distinct_id
	didRaw := 0           // distinct_id's length before escaping
	if m.opt.Project.Simplified() {
		if m.user >= 0 {
			user, hasUser = m.text(m.user, i)
		}
		if m.device >= 0 {
			device, hasDevice = m.text(m.device, i)
		}
		switch {
		case hasUser && user != "":
			idAt0, didRaw = len(dst), len(user)
			dst = appendStringWide(dst, user, m.wide(m.user, user))
		case hasDevice && device != "":
			dst = append(dst, `"$device:`...)
			q := len(dst)
			dst = appendString(dst, device)
			dst = append(dst[:q], dst[q+1:]...) // drop the escaped id's opening quote
			idAt0, didRaw = q, len("$device:")+len(device)
		default:
			return dst, 0, 0, colErr(m.opt.Import.UserColumnName, "row has neither a user id nor a device id")
		}
	} else {
		did, ok := "", false
		if m.did >= 0 {
			did, ok = m.text(m.did, i)
		}
		if !ok || did == "" {
			return dst, 0, 0, colErr(m.opt.Import.DistinctIDColumnName, "distinct id is NULL or empty")
		}
		dst = appendString(dst, did)
		didRaw = len(did)
	}
	hdrEnd := len(dst)
	idEnd0 = hdrEnd
	h.DidLen = uint16(didRaw)
	h.Head = h.Head && record.Verbatim(didRaw, hdrEnd-didAt)
	const idKey = `,"$insert_id":"`
	idAt := hdrEnd + len(idKey)
	given := ""
	if m.iid >= 0 {
		given, _ = m.text(m.iid, i)
	}
	if given != "" {
		dst = append(dst, idKey...)
		if record.ValidInsertID(given) {
			dst = append(dst, given...)
		} else {
			id := uuidText(xxh3.HashString128(given))
			dst = append(dst, id[:]...)
		}
	} else {
		dst = append(dst, idKey+`000000000000000000000000000000000000`...) // patched below
	}
	idEnd := len(dst)
	h.IidLen = uint8(idEnd - idAt)
	dst = append(dst, '"')
	// The ids were escaped once already, for distinct_id. Each is clean
	// (vouch.go) when copied verbatim: its text is the id and two quotes.
	m.comma, m.clean, m.members = true, m.vouch, m.tagMembers
	if hasUser && user != "" {
		dst = append(dst, `,"$user_id":`...)
		dst = append(dst, dst[idAt0:idEnd0]...)
		m.vouchMember(user, idEnd0-idAt0)
	}
	if hasDevice && device != "" {
		dst = append(dst, `,"$device_id":`...)
		if hasUser && user != "" {
			n := len(dst)
			dst = appendString(dst, device)
			m.vouchMember(device, len(dst)-n)
		} else {
			dst = append(dst, '"')
			dst = append(dst, dst[idAt0:idEnd0]...)
			m.vouchMember(device, idEnd0-idAt0+1)
		}
	}
	if dst = m.appendProps(dst, i); m.badJSON {
		return dst, 0, 0, m.jsonErr()
	}
	if given == "" {
		id := m.derivedID(dst[recStart:hdrEnd], dst[idEnd+1:], i)
		copy(dst[idAt:idEnd], id[:])
	}
	if h.IidLen == 36 && string(dst[idAt:idEnd]) == record.NilUUID {
		h.Head = false // a placeholder: ValidInsertID refuses it (a hash gives it once in 2^128)
	}
	dst = append(dst, m.tags...)
	return dst, idAt, idEnd, nil
}

// profile1 writes a people ($set by user), groups ($set by group) or
// lookup-table row.
func (m *Mapper) profile1(dst []byte, i int) ([]byte, int, int, *RowError) {
	m.scratch = m.scratch[:0]
	var ks, ke int
	key, ok := m.text(m.key, i)
	if !ok || key == "" {
		return dst, 0, 0, colErr(m.colName(m.key), "key is NULL or empty")
	}
	switch m.typ {
	case importspec.People:
		dst = append(dst, `{"$distinct_id":`...)
		ks = len(dst) + 1
		dst = appendString(dst, key)
		ke = len(dst) - 1
		dst = append(dst, `,"$set":{`...)
	case importspec.Groups:
		dst = append(dst, `{"$group_key":`...)
		dst = appendString(dst, m.opt.Import.GroupKey)
		dst = append(dst, `,"$group_id":`...)
		ks = len(dst) + 1
		dst = appendString(dst, key)
		ke = len(dst) - 1
		dst = append(dst, `,"$set":{`...)
	default:
		dst = append(dst, `{"key":`...)
		ks = len(dst) + 1
		dst = appendString(dst, key)
		ke = len(dst) - 1
		dst = append(dst, `,"properties":{`...)
	}
	m.comma = false
	if dst = m.appendProps(dst, i); m.badJSON {
		return dst, 0, 0, m.jsonErr()
	}
	dst = append(dst, "}}"...)
	return dst, ks, ke, nil
}

// appendProps writes the row's properties: table columns (struct fields
// flattened), then the JSON-properties column's keys, which lose to a
// table column of the same name.
func (m *Mapper) appendProps(dst []byte, i int) []byte {
	dynUsed := false
	for p := range m.props {
		l := &m.props[p]
		if l.nullable {
			if l.float { // NULL, NaN and ±Inf are all left out
				v := l.enc
				if j := i + v.off; v.valid != nil && v.valid[j>>3]&(1<<(j&7)) == 0 {
					continue
				}
				if f := v.f64[i]; math.IsNaN(f) || math.IsInf(f, 0) {
					continue
				}
			} else if m.nullOnPath(l, i) {
				continue
			}
		}
		if l.dyn {
			if !dynUsed {
				m.resetDyn()
				dynUsed = true
			}
			dst = m.appendDynamic(dst, l.enc, i, l.name)
			continue
		}
		m.members++
		skip := 1 // the comma
		if m.comma {
			skip = 0
		}
		m.comma = true
		if n, k := len(dst), len(l.key)-skip; k <= 16 && cap(dst)-n >= 16 {
			// Sixteen bytes are moved at once, without a call to memmove;
			// those past the key are overwritten next.
			*(*[16]byte)(dst[n : n+16]) = *(*[16]byte)(l.keyPad[skip : skip+16])
			dst = dst[:n+k]
		} else {
			dst = append(dst, l.key[skip:]...)
		}
		// The commonest layouts inline, saving a call or two per value;
		// the output is appendValue's.
		n := len(dst)
		switch v := l.enc; {
		case v.kind == kString && v.offs != nil && !v.json:
			dst = appendStringAt(dst, v, i)
			m.vouchString(dst[n:], v, i)
		case v.kind == kInt && v.i64 != nil:
			if x := v.i64[i]; uint64(x) < 10 {
				dst = append(dst, byte('0'+x))
			} else {
				dst = appendInt(dst, x)
			}
		case v.kind == kFloat && v.f64 != nil:
			dst = strconv.AppendFloat(dst, v.f64[i], 'g', -1, 64)
		case v.kind == kBool && v.bits != nil:
			if j := v.boff + i; v.bits[j>>3]&(1<<(j&7)) != 0 {
				dst = append(dst, "true"...)
			} else {
				dst = append(dst, "false"...)
			}
		case v.kind == kList && v.loff != nil && v.elem.kind == kString && v.elem.offs != nil && v.elem.valid == nil && !v.elem.json:
			dst = append(dst, '[')
			s, e := int(v.loff[i]), int(v.loff[i+1])
			if e-s > record.MaxCleanMembers {
				m.clean = false
			}
			for j := s; j < e; j++ {
				if j > s {
					dst = append(dst, ',')
				}
				k := len(dst)
				dst = appendStringAt(dst, v.elem, j)
				m.vouchString(dst[k:], v.elem, j)
			}
			dst = append(dst, ']')
		default:
			dst = v.appendValue(dst, i)
			if m.clean && !writesClean(v.kind) {
				m.clean = record.CleanValue(dst[n:])
			}
		}
	}
	if m.jsonCol >= 0 && !m.roots[m.jsonCol].isNull(i) {
		if !dynUsed {
			m.resetDyn()
		}
		dst = m.appendDynamic(dst, &m.roots[m.jsonCol], i, "")
	}
	return dst
}

func (m *Mapper) resetDyn() {
	m.dyn, m.dynBuf = m.dyn[:0], m.dynBuf[:0]
	if len(m.seen) > 0 {
		clear(m.seen)
	}
}

func (m *Mapper) jsonErr() *RowError {
	m.badJSON = false
	return colErr(m.opt.Import.JSONPropertiesColumnName, "JSON properties value is not a JSON object")
}

// mayBeNull reports whether nullOnPath can be true for some row of the
// bound batch: only when an array on the path has a validity bitmap, or
// the leaf's kind has values that read as NULL.
func (m *Mapper) mayBeNull(l *leaf) bool {
	v := &m.roots[l.col]
	if v.valid != nil {
		return true
	}
	for _, f := range l.path {
		if v = &v.fields[f]; v.valid != nil {
			return true
		}
	}
	switch v.kind {
	case kNull, kFloat, kDict:
		return true
	}
	return false
}

func (m *Mapper) nullOnPath(l *leaf, i int) bool {
	v := &m.roots[l.col]
	if v.isNull(i) {
		return true
	}
	for _, f := range l.path {
		v = &v.fields[f]
		if v.isNull(i) {
			return true
		}
	}
	return false
}
