// Package enrich applies a project's lookup tables to records at read time
// (segmentation, profile queries, raw export), so a replaced table changes
// every later read without rewriting stored data.
//
// Naming rule: a table declared with property P (config lookup_tables) joins
// on the value of P. When a record's P is a key of the table, every other
// non-empty column C of that key's row is added to the record as the
// property "P.C": a table on item_id with columns id, price and name adds
// item_id.price and item_id.name. The key column itself is not added (the
// record already holds it as P).
//
// Details:
//   - A string value is matched as is; a number by its JSON text as stored
//     (item_id 42 matches key "42"; 42.0 does not). Other types never match.
//   - Tables with maps_to "event" (the default) enrich events, those with
//     maps_to "user" enrich user profiles. Group profiles are not enriched.
//   - A record's own property wins: a lookup never overwrites a property the
//     record already has, so enriched output has no duplicate names.
//   - Tables apply in configuration order; a table never uploaded enriches
//     nothing.
//
// Tables are loaded from the store on first use and cached in memory until
// Invalidate, which the lookup upload handler calls after a replacement.
package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Target says which records a table enriches.
type Target uint8

const (
	Events Target = iota + 1 // maps_to: event (or empty)
	Users                    // maps_to: user
)

func (t Target) matches(mapsTo string) bool {
	if mapsTo == "user" {
		return t == Users
	}
	return t == Events
}

// Enricher caches lookup tables per (project, table id). It is safe for
// concurrent use; a nil *Enricher enriches nothing.
type Enricher struct {
	st  store.Lookups
	log *slog.Logger

	mu    sync.Mutex
	cache map[tableKey]*entry
}

type tableKey struct {
	project int64
	id      string
}

// entry is one load of a table; done is closed when rows or err is set.
// Invalidate drops the entry from the cache, so a load that was running
// then still answers the requests already waiting for it (they began before
// the replacement) but is never seen by a later one.
type entry struct {
	done chan struct{}
	rows map[string][]member
	err  error
}

// member is one property a row adds: its full name, for the collision
// check, and its encoded `"name":value` form, appended as is.
type member struct {
	name string
	enc  []byte
}

// New returns an Enricher reading tables from st.
func New(st store.Lookups, log *slog.Logger) *Enricher {
	if log == nil {
		log = slog.Default()
	}
	return &Enricher{st: st, log: log, cache: map[tableKey]*entry{}}
}

// Invalidate forgets a cached table, so the next read loads the new rows.
func (e *Enricher) Invalidate(project int64, id string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	delete(e.cache, tableKey{project, id})
	e.mu.Unlock()
}

// For returns an Applier for the project's tables of the target kind,
// loading any that are not cached. The Applier is for one goroutine.
func (e *Enricher) For(ctx context.Context, p *config.Project, target Target) (*Applier, error) {
	a := &Applier{}
	if e == nil || p == nil {
		return a, nil
	}
	for _, lt := range p.LookupTables {
		if !target.matches(lt.MapsTo) || lt.Property == "" {
			continue
		}
		rows, err := e.table(ctx, p.ID, lt)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			a.tabs = append(a.tabs, boundTable{prop: lt.Property, rows: rows})
		}
	}
	return a, nil
}

func (e *Enricher) table(ctx context.Context, project int64, lt config.LookupTable) (map[string][]member, error) {
	k := tableKey{project, lt.ID}
	e.mu.Lock()
	ent, ok := e.cache[k]
	if !ok {
		ent = &entry{done: make(chan struct{})}
		e.cache[k] = ent
	}
	e.mu.Unlock()
	if !ok {
		// Not bound to this request: a table is shared by every reader, and
		// a cancelled first reader must not fail the ones queued behind it.
		ent.rows, ent.err = e.load(context.WithoutCancel(ctx), project, lt)
		if ent.err != nil {
			e.mu.Lock()
			if e.cache[k] == ent { // let the next read retry
				delete(e.cache, k)
			}
			e.mu.Unlock()
			e.log.Error("loading lookup table", "project", project, "table", lt.ID, "err", ent.err)
		}
		close(ent.done)
	}
	select {
	case <-ent.done:
		return ent.rows, ent.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (e *Enricher) load(ctx context.Context, project int64, lt config.LookupTable) (map[string][]member, error) {
	rows := map[string][]member{}
	names := map[string]string{} // column → "P.C", shared by every row
	var p fastjson.Parser
	err := e.st.ScanLookup(ctx, project, lt.ID, func(key string, row []byte) error {
		v, err := p.ParseBytes(row)
		if err != nil {
			return fmt.Errorf("row %q: %w", key, err)
		}
		obj, err := v.Object()
		if err != nil {
			return fmt.Errorf("row %q: %w", key, err)
		}
		var (
			ms    []member
			buf   []byte
			ends  []int
			first = true
		)
		obj.Visit(func(col []byte, val *fastjson.Value) {
			if first { // the key column leads every stored row
				first = false
				return
			}
			name, ok := names[string(col)]
			if !ok {
				name = lt.Property + "." + string(col)
				names[string(col)] = name
			}
			buf = jsonw.String(buf, name)
			buf = val.MarshalTo(append(buf, ':'))
			ends = append(ends, len(buf))
			ms = append(ms, member{name: name})
		})
		start := 0
		for i := range ms { // slice only now: buf may have moved while growing
			ms[i].enc = buf[start:ends[i]:ends[i]]
			start = ends[i]
		}
		if len(ms) > 0 {
			rows[key] = ms
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return rows, nil
	}
	if err != nil {
		return nil, fmt.Errorf("enrich: lookup table %q: %w", lt.ID, err)
	}
	return rows, nil
}
