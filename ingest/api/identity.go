package api

import (
	"slices"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// rejectionFailures turns records the store refused (a merge over the
// cluster limit) into failed_records items; idx maps a Ref to the
// request's record index (nil: the same).
func rejectionFailures(b *store.Batch, rejected []store.Rejection, idx []int) []record.Failure {
	if len(rejected) == 0 {
		return nil
	}
	field := map[int]string{}
	for _, m := range b.Merges {
		field[m.Ref] = "properties.$distinct_ids"
	}
	for _, c := range b.Changes {
		switch c.Kind {
		case identity.KindIdentify:
			field[c.Ref] = "properties.$anon_id"
		case identity.KindAlias:
			field[c.Ref] = "properties.alias"
		default:
			field[c.Ref] = "properties.$device_id"
		}
	}
	out := make([]record.Failure, 0, len(rejected))
	for _, r := range rejected {
		i := r.Ref
		if idx != nil {
			i = idx[i]
		}
		f := field[r.Ref]
		out = append(out, record.Failure{Index: i, Field: f, Message: "'" + f + "' is invalid: " + r.Err.Error()})
	}
	return out
}

// dropOldWithChanges drops events before cutoffMs, and the identity
// changes they carried, keeping each change pointing at its event.
func dropOldWithChanges(b *store.Batch, cutoffMs int64) int {
	keep := make([]int, len(b.Events)) // old index → new index, -1 dropped
	n := 0
	for i := range b.Events {
		keep[i] = -1
		if b.Events[i].TimeMs >= cutoffMs {
			keep[i] = n
			b.Events[n] = b.Events[i]
			n++
		}
	}
	dropped := len(b.Events) - n
	b.Events = b.Events[:n]
	b.Changes = slices.DeleteFunc(b.Changes, func(c store.Change) bool { return c.Event >= 0 && keep[c.Event] < 0 })
	for i := range b.Changes {
		if c := &b.Changes[i]; c.Event >= 0 {
			c.Event = keep[c.Event]
		}
	}
	return dropped
}
