package record

import (
	"crypto/subtle"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/valyala/fastjson"
)

const (
	msgMergeAuth   = "'event' is invalid: $merge is accepted only with the project secret, a service account or an OAuth token"
	msgDistinctIDs = "'properties.$distinct_ids' is invalid: must be an array of exactly 2 non-empty strings"
	msgToken       = "'properties.token' is invalid: must be the project token"
)

// merge applies the rules of a $merge record (Original ID Merge) and
// appends it. The same rules apply in lenient mode: nothing has a sane default.
func (d *Decoder) merge(opt *Options, f *fields, nowMs int64, out *store.Batch) bool {
	if !opt.AllowMerge {
		return d.fail("event", msgMergeAuth)
	}
	var ids [2]string
	a, ok := arrayOf(f.distinctIDs)
	if !ok || len(a) != 2 {
		return d.fail("properties.$distinct_ids", msgDistinctIDs)
	}
	d.where = "$distinct_ids"
	for i, e := range a {
		if e.Type() != fastjson.TypeString || len(e.GetStringBytes()) == 0 {
			return d.fail("properties.$distinct_ids", msgDistinctIDs)
		}
		s, ok := d.text(b2s(e.GetStringBytes()))
		if !ok {
			return false
		}
		if s, ok = d.ident("properties.$distinct_ids", s); !ok {
			return false
		}
		ids[i] = d.keep(s)
	}
	// The credential that allows a merge (secret, service account, OAuth)
	// already names the project, so the token may be left out, as the Go
	// SDK's Merge does; a token that is sent must be the project's.
	// Constant time: the check must not leak how much of it matched.
	if f.token != nil && (f.token.Type() != fastjson.TypeString || opt.Token == "" ||
		subtle.ConstantTimeCompare(f.token.GetStringBytes(), []byte(opt.Token)) != 1) {
		return d.fail("properties.token", msgToken)
	}
	ms, ok := d.timeMs(f.time, nowMs, false)
	if !ok {
		return false
	}
	props, ok := d.emitProps(true)
	if !ok {
		return false
	}
	out.Merges = append(out.Merges, store.Merge{DistinctIDs: ids, TimeMs: ms, IngestMs: nowMs, Props: props, Ref: d.idx})
	return true
}

func arrayOf(v *fastjson.Value) ([]*fastjson.Value, bool) {
	if v == nil || v.Type() != fastjson.TypeArray {
		return nil, false
	}
	a, _ := v.Array()
	return a, true
}
