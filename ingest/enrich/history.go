package enrich

import (
	"context"
	"fmt"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// UserPrefix names a user's History-table properties as of an event's
// time in a query expression: properties["$user.plan"] is the plan of the
// event's user in the version of the project's History tables (people
// imports with history:) current at the event's time — the version with
// the latest start ≤ the event's time; absent before the user's first
// version. The event's distinct_id (identity-resolved) is matched with
// the tables' user ids. When several History imports hold the property,
// the version that started last wins. Group History tables are not
// read here (their current version is on the group profile).
const UserPrefix = "$user."

// historyCacheUsers bounds the users whose versions a History keeps: a
// query over many users reloads some instead of growing without bound.
const historyCacheUsers = 4096

// History adds "$user.P" properties to events, for the names P a query's
// expressions read. It loads each user's versions once (store.Histories)
// and keeps a bounded number of users. It belongs to one request; a nil
// *History adds nothing.
type History struct {
	st      store.Histories
	project int64
	names   []string // P of each wanted "$user.P"
	enc     [][]byte // `"$user.P":` of each name
	cache   map[string][]histImport
	p       fastjson.Parser
	buf     []byte
}

// histImport is one import's versions of a user, in start order.
type histImport []histVersion

type histVersion struct {
	start int64
	vals  [][]byte // by name index; nil when the version lacks it
}

// NewHistory returns a History for the "$user." names among keys (the
// where and on expressions' properties), or nil when there are none or
// st is nil (a store without History tables).
func NewHistory(st store.Histories, project int64, keys ...string) *History {
	if st == nil {
		return nil
	}
	h := &History{st: st, project: project, cache: map[string][]histImport{}}
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, UserPrefix)
		if !ok || name == "" || h.index(name) >= 0 {
			continue
		}
		h.names = append(h.names, name)
		h.enc = append(h.enc, append(jsonw.String(nil, k), ':'))
	}
	if len(h.names) == 0 {
		return nil
	}
	return h
}

func (h *History) index(name string) int {
	for i, n := range h.names {
		if n == name {
			return i
		}
	}
	return -1
}

// Apply returns props (a compact JSON object) with the event's user's
// "$user.P" values as of timeMs appended; props itself when there are
// none, else a buffer the next call reuses. A name the event already
// has keeps the event's value (expressions read the first).
func (h *History) Apply(ctx context.Context, distinctID string, timeMs int64, props []byte) ([]byte, error) {
	if h == nil || len(props) < 2 || props[len(props)-1] != '}' {
		return props, nil
	}
	imps, err := h.user(ctx, distinctID)
	if err != nil {
		return nil, err
	}
	out := h.buf[:0]
	for i := range h.names {
		var val []byte
		best := int64(0)
		for _, vs := range imps {
			// The latest version starting at or before timeMs.
			for j := len(vs) - 1; j >= 0; j-- {
				if vs[j].start <= timeMs {
					if v := vs[j].vals[i]; v != nil && (val == nil || vs[j].start >= best) {
						val, best = v, vs[j].start
					}
					break
				}
			}
		}
		if val == nil {
			continue
		}
		if len(out) == 0 {
			out = append(out, props[:len(props)-1]...)
			if len(props) > 2 {
				out = append(out, ',')
			}
		} else {
			out = append(out, ',')
		}
		out = append(append(out, h.enc[i]...), val...)
	}
	if len(out) == 0 {
		return props, nil
	}
	h.buf = append(out, '}')
	return h.buf, nil
}

// user returns the user's versions, loading them on first use.
func (h *History) user(ctx context.Context, id string) ([]histImport, error) {
	if imps, ok := h.cache[id]; ok {
		return imps, nil
	}
	if len(h.cache) >= historyCacheUsers {
		clear(h.cache)
	}
	var (
		imps []histImport
		last string
	)
	err := h.st.HistoryProfile(ctx, h.project, "", id, func(importID string, v store.HistoryVersion) error {
		if len(imps) == 0 || importID != last {
			imps, last = append(imps, nil), importID
		}
		pv, err := h.p.ParseBytes(v.Props)
		if err != nil {
			return fmt.Errorf("history version of %s at %d: %w", id, v.StartMs, err)
		}
		hv := histVersion{start: v.StartMs, vals: make([][]byte, len(h.names))}
		for i, n := range h.names {
			if x := pv.Get(n); x != nil {
				hv.vals[i] = x.MarshalTo(nil)
			}
		}
		imps[len(imps)-1] = append(imps[len(imps)-1], hv)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("enrich: history of %s: %w", id, err)
	}
	h.cache[strings.Clone(id)] = imps // the store may reuse the string's bytes
	return imps, nil
}
