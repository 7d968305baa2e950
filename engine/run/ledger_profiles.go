package run

import (
	"slices"

	"github.com/tributary-dev/tributary/engine/mapping"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
)

// profiles records a written batch's profile updates, one entry per
// source row (a row's $unset of its NULL columns rides beside its $set):
// imported, or refused when the store rejected it (a full identity
// cluster, a profile at its property limit). A profile update is an
// upsert, so no row of these imports is a duplicate. first is the run's
// number of the batch's first row (ProfileUpdate.Ref counts from it).
func (l *ledger) profiles(batch *store.Batch, res store.WriteResult, keys *rowKeys, first int64) {
	last := -1
	for i := range batch.Profiles {
		u := &batch.Profiles[i]
		if u.Ref == last {
			continue
		}
		last = u.Ref
		key := ""
		if row := int64(u.Ref) - first; keys.cols != nil && row >= 0 && int(row) < len(keys.ends) {
			key = unsafeString(keys.key(int(row)))
		} else if u.Kind == profile.Group {
			key = u.GroupID
		} else {
			key = u.DistinctID
		}
		if key == "" {
			continue
		}
		e := store.LedgerEntry{Hash: store.LedgerKeyHash(key), Outcome: store.OutcomeImported}
		for _, rj := range res.Rejected {
			if rj.Ref == u.Ref {
				e.Outcome, e.Reason = store.OutcomeRefused, rj.Err.Error()
				if l.again != nil {
					l.again = append(l.again, e.Hash)
				}
				break
			}
		}
		l.entries = append(l.entries, e)
	}
}

// lookups records the rows of a lookup table's batch that were kept. They
// are held (l.held) until the table is stored whole at the end of the
// pass, so the ledger never says imported of a table a crash lost.
func (l *ledger) lookups(out *mapping.Records, fails []mapping.RowError, keys *rowKeys, first int64) {
	refused := l.dups[:0]
	for _, f := range fails {
		refused = append(refused, int32(f.Row-first))
	}
	slices.Sort(refused)
	l.dups = refused
	for i := range out.Len() {
		row := out.Rows[i]
		if _, found := slices.BinarySearch(refused, row); found {
			continue
		}
		key := string(out.Key(i))
		if keys.cols != nil && int(row) < len(keys.ends) {
			key = unsafeString(keys.key(int(row)))
		}
		if key == "" {
			continue
		}
		l.held = append(l.held, store.LedgerEntry{Hash: store.LedgerKeyHash(key), Outcome: store.OutcomeImported})
	}
}

// release hands the held entries to the next append (the lookup table is
// stored).
func (l *ledger) release() {
	if l == nil {
		return
	}
	l.entries = append(l.entries, l.held...)
	l.held = nil
}
