package export

import (
	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/store"
)

// EventRow is what a where expression sees of one stored event: the
// built-in fields that export prints inside "properties" (time in seconds,
// distinct_id, $insert_id, mp_processing_time_ms) plus the stored
// properties. One EventRow is reused for a whole export (or segmentation
// query, which filters events the same way), so filtering allocates
// nothing per event once its buffers have grown.
type EventRow struct {
	e      *store.Event
	p      fastjson.Parser
	props  *fastjson.Value
	parsed bool
	arena  fastjson.Arena // holds the built-in fields as JSON values, reset per event
}

// Reset points the row at e; the row reads e until the next Reset.
func (r *EventRow) Reset(e *store.Event) {
	r.e, r.props, r.parsed = e, nil, false
	r.arena.Reset()
}

// Get answers built-in fields from the event's columns and parses the
// stored properties only when the expression asks for one of them, so
// a filter on distinct_id never decodes JSON.
func (r *EventRow) Get(key string) *fastjson.Value {
	switch key {
	case "distinct_id":
		return r.arena.NewString(r.e.DistinctID)
	case "$insert_id":
		if r.e.InsertID == "" {
			return nil
		}
		return r.arena.NewString(r.e.InsertID)
	case "time": // seconds, as export prints it by default
		return r.arena.NewNumberInt(int(floorDiv(r.e.TimeMs, 1000)))
	case "mp_processing_time_ms":
		return r.arena.NewNumberInt(int(r.e.IngestMs))
	}
	if !r.parsed {
		r.parsed = true
		if v, err := r.p.ParseBytes(r.e.Props); err == nil && v.Type() == fastjson.TypeObject {
			r.props = v
		}
	}
	if r.props == nil {
		return nil
	}
	return r.props.Get(key)
}
