package mapping

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// leaf is one property written by a column: the column itself, or one
// field of a STRUCT column (path from the column root), or a MAP/JSON
// column whose keys are only known per row (dyn).
type leaf struct {
	col  int
	path []int
	enc  *venc
	key  []byte // `,"name":`, pre-encoded
	// keyPad is key zero-padded, for a fixed-size copy when it is short.
	keyPad [24]byte
	name   string
	dyn    bool
	// nullable is set per batch: some value on the path may be NULL (or
	// a float not representable in JSON), so each row must be checked.
	nullable bool
	float    bool // a float64 column of its own, checked inline
}

// Mapper maps batches of one schema. It is not safe for concurrent use;
// give each goroutine its own (New is cheap next to a batch).
type Mapper struct {
	opt   Options
	typ   string
	roots []venc
	props []leaf
	plans []ColumnPlan

	event, tm, user, device, did, iid, jsonCol, key int
	staticEvent                                     []byte
	tags                                            []byte
	common                                          []byte   // the tags as an object, with Options.CommonTags
	pkCols                                          []int    // key columns for $insert_id; nil: hash the whole row
	extraCols                                       []int    // columns not in the record, hashed when pkCols is nil
	extraTags                                       [][]byte // 0x1f and the name of each extraCols column
	names                                           map[string]struct{}
	fixedBloom                                      bloom1k // over the tags of names

	scratch []byte
	unesc   []byte // a JSON string unescaped, before it is re-quoted
	hashBuf []byte
	seen    map[uint64]struct{}
	dyn     []dynName // dynamic names taken in this row
	dynBuf  []byte
	comma   bool
	badJSON bool // the row's JSON-properties value is not an object
	// uniqueNames: no two table columns (or STRUCT fields) write one
	// property name. Names read per row (MAP, JSON) are claimed against
	// those and each other, so then no record repeats a name.
	uniqueNames bool
	static      map[string]struct{} // the names table columns and STRUCT fields write
	// vouch: this schema's records can be vouched for (vouch.go); clean
	// and members are the current record's verdict and property count,
	// which starts at tagMembers (the run tags each record carries).
	vouch, clean        bool
	members, tagMembers int
	head                record.Vouch // the current record's, without Rest
	staticClean         bool         // staticEvent is a clean name
}

// New plans the mapping of batches with schema s.
func New(opt Options, s *arrow.Schema) (*Mapper, error) {
	im := opt.Import
	m := &Mapper{opt: opt, typ: im.ImportType, names: map[string]struct{}{}, seen: map[uint64]struct{}{}}
	var err error
	idx := func(name string) int {
		i, e := fieldIndex(s, name)
		if e != nil && err == nil {
			err = e
		}
		return i
	}
	m.event, m.tm = idx(im.EventColumnName), idx(im.TimeColumnName)
	m.user, m.device = idx(im.UserColumnName), idx(im.DeviceColumnName)
	m.did, m.iid = idx(im.DistinctIDColumnName), idx(im.InsertIDColumnName)
	m.jsonCol = idx(im.JSONPropertiesColumnName)
	switch im.ImportType {
	case importspec.Groups:
		m.key = idx(im.GroupIDColumn)
	case importspec.LookupTable:
		m.key = idx(im.PropertyKeyColumnName)
	case importspec.People:
		m.key = m.user
		if m.key < 0 {
			m.key = m.did
		}
	default:
		m.key = -1
	}
	if err != nil {
		return nil, err
	}
	if m.typ == importspec.EventStream && m.tm < 0 {
		return nil, fmt.Errorf("time column %q is not in the batch", im.TimeColumnName)
	}
	if m.typ != importspec.EventStream && m.key < 0 {
		return nil, fmt.Errorf("%s import needs its key column", m.typ)
	}
	if m.event < 0 {
		m.staticEvent = jsonw.String(nil, im.Event())
	}
	m.plan(s)
	m.static, m.uniqueNames = m.staticNames()
	for _, c := range m.extraCols {
		m.extraTags = append(m.extraTags, append([]byte{0x1f}, m.plans[c].Column...))
	}
	for _, r := range reservedNames {
		m.names[r] = struct{}{} // JSON keys never overwrite the mapper's own fields
	}
	for n := range m.names {
		m.fixedBloom.add(nameTag([]byte(n)))
	}
	m.tags = m.tagBytes()
	m.planVouch()
	if opt.Schema != nil {
		for _, k := range opt.Schema.PrimaryKey {
			if i := idx(k); i >= 0 {
				m.pkCols = append(m.pkCols, i)
			}
		}
	}
	return m, nil
}

func (m *Mapper) roleOf(i int) Role {
	switch i {
	case m.event:
		return RoleEvent
	case m.tm:
		return RoleTime
	case m.user:
		return RoleUser
	case m.device:
		return RoleDevice
	case m.did:
		return RoleDistinctID
	case m.iid:
		return RoleInsertID
	case m.jsonCol:
		return RoleJSON
	case m.key:
		return RoleKey
	}
	return RoleProperty
}

// plan decides, once per schema, what each column becomes.
func (m *Mapper) plan(s *arrow.Schema) {
	im := m.opt.Import
	excluded := map[string]bool{}
	for _, c := range im.ExcludeColumns {
		excluded[c] = true
	}
	m.roots = make([]venc, s.NumFields())
	for i, f := range s.Fields() {
		m.roots[i] = newVenc(f.Type, jsonColumn(m.opt.Schema, f.Name))
		role := m.roleOf(i)
		pl := ColumnPlan{Column: f.Name, Type: f.Type, Role: role}
		if role == RoleJSON {
			pl.Flattened = true
		}
		if role == RoleProperty && excluded[f.Name] {
			pl.Role = RoleExcluded
		}
		if pl.Role == RoleExcluded || (role != RoleProperty && role != RoleJSON) {
			m.extraCols = append(m.extraCols, i)
		}
		if pl.Role != RoleProperty {
			m.plans = append(m.plans, pl)
			continue
		}
		name := f.Name
		if to, ok := im.PropertyMappings[f.Name]; ok {
			name, pl.Renamed = to, true
		}
		pl.Property = name
		if isReserved(name) {
			pl.Role, pl.Note = RoleShadowed, "property name is written by the mapper"
			m.extraCols = append(m.extraCols, i)
			m.plans = append(m.plans, pl)
			continue
		}
		root := &m.roots[i]
		pl.Flattened = root.kind == kStruct || root.kind == kMap || root.json
		m.addLeaves(i, root, nil, name)
		m.plans = append(m.plans, pl)
	}
}

func (m *Mapper) addLeaves(col int, v *venc, path []int, name string) {
	if v.kind == kStruct {
		for f := range v.fields {
			p := append(append([]int(nil), path...), f)
			m.addLeaves(col, &v.fields[f], p, name+"."+v.names[f])
		}
		return
	}
	m.names[name] = struct{}{}
	l := leaf{col: col, path: path, enc: v, key: append([]byte{','}, keyJSON(name)...), name: name,
		dyn: v.kind == kMap || v.json}
	copy(l.keyPad[:], l.key)
	m.props = append(m.props, l)
}

// tagBytes returns what ends each event: the run's tags and the record's
// closing braces, or only the braces when the tags are common (then
// m.common holds them as an object).
func (m *Mapper) tagBytes() []byte {
	if m.typ != importspec.EventStream {
		return nil
	}
	b := []byte(`,"$warehouse_import_id":`)
	b = jsonw.String(b, m.opt.Import.ID)
	b = append(b, `,"$warehouse_import_job_id":`...)
	b = jsonw.String(b, m.opt.RunID)
	b = append(b, `,"$import":true,"$source":"warehouse-import"`...)
	if m.opt.CommonTags {
		m.common = append(append([]byte{'{'}, b[1:]...), '}')
		return []byte("}}")
	}
	return append(b, "}}"...)
}

// Plan reports how each source column is mapped.
func (m *Mapper) Plan() []ColumnPlan { return m.plans }

// staticNames returns the names of the properties table columns and
// STRUCT fields write, and whether they are distinct (a column renamed to
// another's name, or a column named "a.b" beside STRUCT a's field b,
// would repeat one). Reserved names never get here: they are shadowed.
func (m *Mapper) staticNames() (names map[string]struct{}, distinct bool) {
	names = make(map[string]struct{}, len(m.props))
	distinct = true
	for _, l := range m.props {
		if l.dyn {
			continue
		}
		if _, dup := names[l.name]; dup {
			distinct = false
		}
		names[l.name] = struct{}{}
	}
	return names, distinct
}
