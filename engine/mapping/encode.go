package mapping

import (
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Map appends one record per row of rec to out; rows that cannot be mapped
// become out.Errs (Row is the batch row) and no record.
func (m *Mapper) Map(rec arrow.RecordBatch, out *Records) {
	for i := range m.roots {
		m.roots[i].bind(rec.Column(i))
	}
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
	}
}

func colErr(col, msg string) *RowError { return &RowError{Column: col, Message: msg} }

func (m *Mapper) colName(i int) string {
	return m.plans[i].Column
}

// text returns column c's value at row i as an identifier string (strings
// as they are, integers in decimal); ok is false for NULL or other types.
func (m *Mapper) text(c, i int) (string, bool) {
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
	if m.event >= 0 {
		name, ok := m.text(m.event, i)
		if !ok || name == "" {
			return dst, 0, 0, colErr(m.colName(m.event), "event name is NULL or empty")
		}
		dst = jsonw.String(dst, name)
	} else {
		dst = append(dst, m.staticEvent...)
	}
	ms, rerr := timeMs(&m.roots[m.tm], i)
	if rerr != "" {
		return dst, 0, 0, colErr(m.colName(m.tm), rerr)
	}
	dst = append(dst, `,"properties":{"time":`...)
	dst = strconv.AppendInt(dst, ms, 10)
	dst = append(dst, `,"distinct_id":`...)
	var user, device string
	var hasUser, hasDevice bool
	if m.opt.Project.Simplified {
		if m.user >= 0 {
			user, hasUser = m.text(m.user, i)
		}
		if m.device >= 0 {
			device, hasDevice = m.text(m.device, i)
		}
		switch {
		case hasUser && user != "":
			dst = jsonw.String(dst, user)
		case hasDevice && device != "":
			dst = append(dst, `"$device:`...)
			q := len(dst)
			dst = jsonw.String(dst, device)
			dst = append(dst[:q], dst[q+1:]...) // drop the escaped id's opening quote
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
		dst = jsonw.String(dst, did)
	}
	hdrEnd := len(dst)
	dst = append(dst, `,"$insert_id":"`...)
	idAt := len(dst)
	given := ""
	if m.iid >= 0 {
		given, _ = m.text(m.iid, i)
	}
	if given != "" {
		if record.ValidInsertID(given) {
			dst = append(dst, given...)
		} else {
			id := uuidText(xxh3.HashString128(given))
			dst = append(dst, id[:]...)
		}
	} else {
		dst = append(dst, "000000000000000000000000000000000000"...) // patched below
	}
	idEnd := len(dst)
	dst = append(dst, '"')
	if hasUser && user != "" {
		dst = append(dst, `,"$user_id":`...)
		dst = jsonw.String(dst, user)
	}
	if hasDevice && device != "" {
		dst = append(dst, `,"$device_id":`...)
		dst = jsonw.String(dst, device)
	}
	m.comma = true
	if dst = m.appendProps(dst, i); m.badJSON {
		return dst, 0, 0, m.jsonErr()
	}
	if given == "" {
		id := m.derivedID(dst[recStart:hdrEnd], dst[idEnd+1:], i)
		copy(dst[idAt:idEnd], id[:])
	}
	dst = append(dst, m.tags...)
	dst = append(dst, "}}"...)
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
		dst = jsonw.String(dst, key)
		ke = len(dst) - 1
		dst = append(dst, `,"$set":{`...)
	case importspec.Groups:
		dst = append(dst, `{"$group_key":`...)
		dst = jsonw.String(dst, m.opt.Import.GroupKey)
		dst = append(dst, `,"$group_id":`...)
		ks = len(dst) + 1
		dst = jsonw.String(dst, key)
		ke = len(dst) - 1
		dst = append(dst, `,"$set":{`...)
	default:
		dst = append(dst, `{"key":`...)
		ks = len(dst) + 1
		dst = jsonw.String(dst, key)
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
		if m.nullOnPath(l, i) {
			continue
		}
		if l.dyn {
			if !dynUsed {
				m.resetDyn()
				dynUsed = true
			}
			dst = m.appendDynamic(dst, l.enc, i, l.name)
			continue
		}
		if m.comma {
			dst = append(dst, ',')
		}
		m.comma = true
		dst = append(dst, l.key...)
		dst = l.enc.appendValue(dst, i)
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
