package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/enrich"
	"github.com/tributary-dev/tributary/ingest/export"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/where"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Segmentation counts one event per time bucket, optionally filtered by
// where and broken down by the value of on. Days are UTC days (projects
// have no time zone setting); distinct_ids are identity-resolved, so a
// unique count after a merge counts the merged user once; duplicates are
// already gone (the store keeps one copy per dedup key). Events see their
// lookup-table properties, so where and on can use them.

const (
	maxBuckets      = 10000 // e.g. a year of hours; bounds memory per segment
	defaultSegments = 60
	maxSegments     = 10000
	// undefinedSegment is the on-value of events without the property,
	// as the public API labels them.
	undefinedSegment = "undefined"
)

type segUnit uint8

const (
	unitDay segUnit = iota
	unitHour
	unitMonth
)

type segQuery struct {
	event    string
	from, to time.Time // UTC days, both inclusive
	unit     segUnit
	where    *where.Expr
	on       *where.Value
	kind     string // general, unique or average
	limit    int
}

func parseSegmentation(q url.Values) (segQuery, error) {
	sq := segQuery{event: q.Get("event"), kind: "general", limit: defaultSegments}
	if sq.event == "" {
		return sq, errors.New("event is required (one event name)")
	}
	for _, name := range []string{"interval", "format"} {
		if q.Has(name) {
			return sq, fmt.Errorf("%s is not supported", name)
		}
	}
	var err error
	if sq.from, err = queryDay(q, "from_date"); err != nil {
		return sq, err
	}
	if sq.to, err = queryDay(q, "to_date"); err != nil {
		return sq, err
	}
	if sq.to.Before(sq.from) {
		return sq, errors.New("to_date is before from_date")
	}
	switch q.Get("unit") {
	case "", "day":
	case "hour":
		sq.unit = unitHour
	case "month":
		sq.unit = unitMonth
	default:
		return sq, fmt.Errorf("unit must be hour, day or month, got %q", q.Get("unit"))
	}
	switch t := q.Get("type"); t {
	case "", "general":
	case "unique", "average":
		sq.kind = t
	default:
		return sq, fmt.Errorf("type must be general, unique or average, got %q", t)
	}
	if sq.where, err = parseWhere("where", q.Get("where")); err != nil {
		return sq, err
	}
	if sq.on, err = where.ParseValue(q.Get("on")); err != nil {
		return sq, fmt.Errorf("invalid on expression: %w", err)
	}
	if sq.limit, err = positiveInt(q, "limit", defaultSegments, maxSegments); err != nil {
		return sq, err
	}
	if n := len(sq.series()); n > maxBuckets {
		return sq, fmt.Errorf("the range has %d %s buckets; at most %d", n, q.Get("unit"), maxBuckets)
	}
	return sq, nil
}

func queryDay(q url.Values, key string) (time.Time, error) {
	v := q.Get(key)
	if v == "" {
		return time.Time{}, fmt.Errorf("%s is required (YYYY-MM-DD)", key)
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s must be a date in YYYY-MM-DD form, got %q", key, v)
	}
	return t, nil
}

// series lists the bucket labels from from to to, oldest first: dates for
// days, "YYYY-MM-DD HH:00:00" for hours, the first day of each month.
func (sq *segQuery) series() []string {
	var out []string
	end := sq.to.AddDate(0, 0, 1)
	switch sq.unit {
	case unitHour:
		for t := sq.from; t.Before(end) && len(out) <= maxBuckets; t = t.Add(time.Hour) {
			out = append(out, t.Format("2006-01-02 15:00:00"))
		}
	case unitMonth:
		for t := time.Date(sq.from.Year(), sq.from.Month(), 1, 0, 0, 0, 0, time.UTC); t.Before(end); t = t.AddDate(0, 1, 0) {
			out = append(out, t.Format(time.DateOnly))
		}
	default:
		for t := sq.from; t.Before(end) && len(out) <= maxBuckets; t = t.AddDate(0, 0, 1) {
			out = append(out, t.Format(time.DateOnly))
		}
	}
	return out
}

// bucket is the series index of an event time within the range.
func (sq *segQuery) bucket(ms int64) int {
	fromMs := sq.from.UnixMilli()
	switch sq.unit {
	case unitHour:
		return int((ms - fromMs) / int64(time.Hour/time.Millisecond))
	case unitMonth:
		t := time.UnixMilli(ms).UTC()
		return (t.Year()-sq.from.Year())*12 + int(t.Month()) - int(sq.from.Month())
	}
	return int((ms - fromMs) / dayMs)
}

// segment accumulates one on-value: events per bucket and, for unique and
// average, the set of users per bucket (interned ids).
type segment struct {
	name   string
	counts []int64
	users  []map[uint32]struct{}
}

type segCounter struct {
	sq      *segQuery
	buckets int
	segs    map[string]*segment
	ids     map[string]uint32 // distinct_id → small id, for the user sets
	row     export.EventRow
	ev      store.Event // the event with lookup properties; reused
	ap      *enrich.Applier
	val     []byte
	hist    *enrich.History // "$user.P" as of the event's time
	asOf    store.Event     // the event with History properties; reused
}

func (c *segCounter) add(ctx context.Context, stored *store.Event) error {
	e := stored
	if !c.ap.Empty() {
		c.ev = *stored
		c.ev.Props = c.ap.Apply(stored.Props)
		e = &c.ev
	}
	if c.hist != nil {
		props, err := c.hist.Apply(ctx, e.DistinctID, e.TimeMs, e.Props)
		if err != nil {
			return err
		}
		c.asOf = *e
		c.asOf.Props = props
		e = &c.asOf
	}
	c.row.Reset(e)
	if !c.sq.where.Match(&c.row) {
		return nil
	}
	b := c.sq.bucket(e.TimeMs)
	if b < 0 || b >= c.buckets {
		return nil
	}
	name := c.segmentName(e)
	seg, ok := c.segs[string(name)] // no allocation: the compiler sees the lookup
	if !ok {
		seg = &segment{name: string(name), counts: make([]int64, c.buckets)}
		if c.sq.kind != "general" {
			seg.users = make([]map[uint32]struct{}, c.buckets)
		}
		c.segs[seg.name] = seg
	}
	seg.counts[b]++
	if seg.users != nil {
		id, ok := c.ids[e.DistinctID]
		if !ok {
			id = uint32(len(c.ids))
			c.ids[strings.Clone(e.DistinctID)] = id // the store may reuse the string's bytes
		}
		if seg.users[b] == nil {
			seg.users[b] = map[uint32]struct{}{}
		}
		seg.users[b][id] = struct{}{}
	}
	return nil
}

// segmentName is the legend label of an event: the event name without on,
// else the on-value as text (a string as is, other JSON as its text).
func (c *segCounter) segmentName(e *store.Event) []byte {
	if c.sq.on == nil {
		c.val = append(c.val[:0], e.Name...)
		return c.val
	}
	v := c.sq.on.Eval(&c.row)
	switch {
	case v == nil:
		c.val = append(c.val[:0], undefinedSegment...)
	case v.Type() == fastjson.TypeString:
		c.val = append(c.val[:0], v.GetStringBytes()...)
	default:
		c.val = v.MarshalTo(c.val[:0])
	}
	return c.val
}

// value is what a segment reports for bucket b under the query's type.
func (c *segCounter) value(seg *segment, b int) float64 {
	switch c.sq.kind {
	case "unique":
		return float64(len(seg.users[b]))
	case "average":
		if n := len(seg.users[b]); n > 0 {
			return float64(seg.counts[b]) / float64(n)
		}
		return 0
	}
	return float64(seg.counts[b])
}

func (s *Server) handleSegmentation(w http.ResponseWriter, r *http.Request) {
	p, q, ok := s.queryParams(w, r, http.MethodGet, http.MethodPost)
	if !ok {
		return
	}
	sq, err := parseSegmentation(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	series := sq.series()
	c := &segCounter{sq: &sq, buckets: len(series), segs: map[string]*segment{}, ids: map[string]uint32{}}
	if c.ap, err = s.enrich.For(r.Context(), p.Project, enrich.Events); err != nil {
		s.answerReadError(w, r, "segmentation", p.Project.ID, err)
		return
	}
	keys := sq.where.Keys()
	if sq.on != nil {
		keys = append(keys, sq.on.Key())
	}
	var done func()
	if c.hist, done, err = s.history(r.Context(), p.Project.ID, keys...); err != nil {
		return // the client went away while waiting its turn
	}
	defer done()
	scan := store.Scan{Project: p.Project.ID, Resolve: true, Events: []string{sq.event}}
	if err := scanDays(r.Context(), s.store, scan, sq.from.UnixMilli(), sq.to.AddDate(0, 0, 1).UnixMilli(),
		func(e *store.Event) error { return c.add(r.Context(), e) }); err != nil {
		s.answerReadError(w, r, "segmentation", p.Project.ID, err)
		return
	}
	out := c.appendResult(nil, series)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// appendResult writes {"data":{"series":[…],"values":{…}},"legend_size":N}
// with the limit largest segments (by their sum over the range), every
// bucket present, zeros included, as the public API does.
func (c *segCounter) appendResult(dst []byte, series []string) []byte {
	type ranked struct {
		seg *segment
		sum float64
	}
	if c.sq.on == nil && len(c.segs) == 0 { // no events: the event's line, all zeros
		c.segs[c.sq.event] = &segment{name: c.sq.event, counts: make([]int64, c.buckets), users: make([]map[uint32]struct{}, c.buckets)}
	}
	list := make([]ranked, 0, len(c.segs))
	for _, seg := range c.segs {
		rk := ranked{seg: seg}
		for b := range c.buckets {
			rk.sum += c.value(seg, b)
		}
		list = append(list, rk)
	}
	slices.SortFunc(list, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.sum, a.sum), strings.Compare(a.seg.name, b.seg.name))
	})
	if c.sq.on != nil && len(list) > c.sq.limit {
		list = list[:c.sq.limit]
	}
	dst = append(dst, `{"data":{"series":[`...)
	for i, label := range series {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonw.String(dst, label)
	}
	dst = append(dst, `],"values":{`...)
	for i, rk := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsonw.String(dst, rk.seg.name), ":{"...)
		for b, label := range series {
			if b > 0 {
				dst = append(dst, ',')
			}
			dst = append(jsonw.String(dst, label), ':')
			dst = strconv.AppendFloat(dst, c.value(rk.seg, b), 'f', -1, 64)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `}},"legend_size":`...)
	dst = jsonw.Int(dst, int64(len(list)))
	return append(dst, "}\n"...)
}
