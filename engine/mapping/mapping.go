package mapping

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Options configure a Mapper.
type Options struct {
	Import  *importspec.Import
	Project importspec.Project
	// RunID is the sync run; it becomes $warehouse_import_job_id.
	RunID string
	// Schema is the discovered schema; it says which text columns hold
	// JSON (their Arrow type is just a string).
	Schema *connectors.Schema
	// CommonTags leaves the run's tags ($warehouse_import_id, …) out of
	// each event and puts them in Records.Common once, for a store.Batch's
	// Common: they are a quarter of a typical synced event's bytes, and
	// every stage after the mapper pays for each byte.
	CommonTags bool
	// KeyID derives $insert_id from the primary key alone (Mirror syncs):
	// an updated row keeps its id even when its time or user changed.
	KeyID bool
}

// RowError is a row that could not become a record.
type RowError struct {
	Row     int64  // row number within the run (or the batch, before Offset)
	Key     string // the row's key: $insert_id, user id or lookup key
	Column  string // source column, when the problem is a column's value
	Field   string // record field, when the validator refused it
	Message string
}

func (e RowError) Error() string {
	where := e.Column
	if where == "" {
		where = e.Field
	}
	return fmt.Sprintf("row %d (%s): %s: %s", e.Row, e.Key, where, e.Message)
}

// Records is one batch's output: records laid end to end in Buf.
type Records struct {
	Buf  []byte
	Ends []int   // record i is Buf[Ends[i-1]:Ends[i]] (Ends[-1] = 0)
	Rows []int32 // batch row of record i
	Errs []RowError
	// Common is the JSON object of properties every event has besides its
	// own (Options.CommonTags); nil otherwise.
	Common []byte
	// UniqueNames: no record repeats a top-level property name (see
	// record.Options.UniqueNames); false when two columns map to one name.
	UniqueNames bool
	// Vouched is record.Options.Vouched for events: per record, what the
	// mapper checked while writing it (vouch.go).
	Vouched []record.Vouch
	keys    []int // start, end in Buf of record i's key (escaped JSON text)
}

// Reset empties r, keeping its memory.
func (r *Records) Reset() {
	r.Buf, r.Ends, r.Rows, r.Errs, r.keys = r.Buf[:0], r.Ends[:0], r.Rows[:0], r.Errs[:0], r.keys[:0]
	r.Vouched = r.Vouched[:0]
	r.Common, r.UniqueNames = nil, false
}

// Len is the number of records.
func (r *Records) Len() int { return len(r.Ends) }

// Record returns record i.
func (r *Records) Record(i int) []byte {
	start := 0
	if i > 0 {
		start = r.Ends[i-1]
	}
	return r.Buf[start:r.Ends[i]]
}

// Key returns record i's key: the $insert_id of an event, the user or
// group id of a profile update, the lookup key (JSON-escaped). It points
// into Buf; copy it to keep it.
func (r *Records) Key(i int) []byte { return r.Buf[r.keys[2*i]:r.keys[2*i+1]] }

// Slices appends every record to dst (the shape record.Decoder takes).
func (r *Records) Slices(dst [][]byte) [][]byte {
	start := 0
	for _, end := range r.Ends {
		dst = append(dst, r.Buf[start:end:end])
		start = end
	}
	return dst
}

// Role says what a source column is used for.
type Role string

const (
	RoleProperty   Role = "property"
	RoleEvent      Role = "event name"
	RoleTime       Role = "time"
	RoleUser       Role = "$user_id"
	RoleDevice     Role = "$device_id"
	RoleDistinctID Role = "distinct_id"
	RoleInsertID   Role = "$insert_id"
	RoleJSON       Role = "json properties"
	RoleKey        Role = "key"
	RoleExcluded   Role = "excluded"
	RoleShadowed   Role = "shadowed" // its property name is reserved
)

// ColumnPlan is how one source column is mapped, for preview reports.
type ColumnPlan struct {
	Column    string
	Type      arrow.DataType
	Role      Role
	Property  string // property name (the prefix, when flattened)
	Renamed   bool
	Flattened bool // STRUCT, MAP or JSON objects become dotted names
	Note      string
}

// reserved property names the mapper writes itself; a column mapped to one
// of them is shadowed.
var reservedNames = append([]string{"time", "distinct_id", "$insert_id", "$user_id", "$device_id"}, runTagNames...)

// runTagNames are the run's tags (tagBytes writes them), which
// Options.CommonTags moves to Records.Common.
var runTagNames = []string{"$warehouse_import_id", "$warehouse_import_job_id", "$import", "$source"}

func isReserved(name string) bool {
	for _, r := range reservedNames {
		if r == name {
			return true
		}
	}
	return false
}

// keyJSON pre-encodes `"name":`.
func keyJSON(name string) []byte {
	return append(jsonw.String(nil, name), ':')
}

func fieldIndex(s *arrow.Schema, name string) (int, error) {
	if name == "" {
		return -1, nil
	}
	idx := s.FieldIndices(name)
	if len(idx) == 0 {
		return -1, fmt.Errorf("column %q is not in the batch", name)
	}
	return idx[0], nil
}

func jsonColumn(s *connectors.Schema, name string) bool {
	if s == nil {
		return false
	}
	c, ok := s.Column(name)
	if !ok {
		return false
	}
	switch strings.ToUpper(c.SourceType) {
	case "JSON", "JSONB", "VARIANT", "OBJECT", "SUPER":
		return true
	}
	return false
}

// AppendValue appends row i of arr as the JSON value the mapper would
// write (for reports; it plans the column on every call).
func AppendValue(dst []byte, arr arrow.Array, i int) []byte {
	v := newVenc(arr.DataType(), false)
	v.bind(arr)
	if v.isNull(i) {
		return append(dst, "null"...)
	}
	return v.appendValue(dst, i)
}
