// Package export streams a project's stored events in the raw-export shape
// of the public API: one {"event":…,"properties":{…}} object per line.
package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/enrich"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/where"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// MaxLimit is the public API's ceiling for the limit parameter.
const MaxLimit = 100000

// ErrBadRequest wraps every problem with the query parameters.
var ErrBadRequest = errors.New("bad export request")

// Request is a parsed export query.
type Request struct {
	Project  int64
	From, To time.Time // UTC days, both inclusive
	Events   []string
	Where    *where.Expr // nil matches every event
	Limit    int
	TimeInMs bool
	// Enrich adds lookup-table properties (package enrich); nil adds none.
	// The where filter sees them too. Not a query parameter: the handler
	// sets it from the project's tables.
	Enrich *enrich.Applier
	// History gives the where filter the "$user.P" properties of the
	// event's user as of its time (enrich.UserPrefix); the exported line
	// does not carry them. Set by the handler; nil adds none.
	History *enrich.History
}

// ParseRequest reads from_date, to_date, event, where, limit and time_in_ms.
func ParseRequest(project int64, q url.Values) (Request, error) {
	r := Request{Project: project}
	var err error
	if r.From, err = day(q, "from_date"); err != nil {
		return r, err
	}
	if r.To, err = day(q, "to_date"); err != nil {
		return r, err
	}
	if r.To.Before(r.From) {
		return r, fmt.Errorf("%w: to_date is before from_date", ErrBadRequest)
	}
	// The documented form is a JSON array; the official Go SDK sends one
	// bare name, which cannot be mistaken for an array.
	if ev := q.Get("event"); ev != "" && !strings.HasPrefix(strings.TrimSpace(ev), "[") {
		r.Events = []string{ev}
	} else if ev != "" {
		if err := json.Unmarshal([]byte(ev), &r.Events); err != nil {
			return r, fmt.Errorf("%w: event must be a JSON array of strings, e.g. [\"signup\",\"purchase\"]", ErrBadRequest)
		}
	}
	// The *where.SyntaxError stays in the chain (errors.As) with its offset.
	if r.Where, err = where.Parse(q.Get("where")); err != nil {
		return r, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if l := q.Get("limit"); l != "" {
		if r.Limit, err = strconv.Atoi(l); err != nil || r.Limit <= 0 || r.Limit > MaxLimit {
			return r, fmt.Errorf("%w: limit must be an integer from 1 to %d", ErrBadRequest, MaxLimit)
		}
	}
	r.TimeInMs = q.Get("time_in_ms") == "true" || q.Get("time_in_ms") == "1"
	return r, nil
}

func day(q url.Values, key string) (time.Time, error) {
	v := q.Get(key)
	if v == "" {
		return time.Time{}, fmt.Errorf("%w: %s is required (YYYY-MM-DD)", ErrBadRequest, key)
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s must be a date in YYYY-MM-DD form, got %q", ErrBadRequest, key, v)
	}
	return t, nil
}

// EventScanner is all an export needs of a store: store.Store's
// ScanEvents.
type EventScanner interface {
	ScanEvents(ctx context.Context, q store.Scan, fn func(*store.Event) error) error
}

// Write streams the matching events to w and returns how many it wrote.
// It scans one UTC day at a time so that the store's ordered scan never
// has to sort more than a day, whatever the range. distinct_id is the
// identity-resolved (canonical) id, as every read API reports it, so an
// export agrees with segmentation and profile queries after a merge.
func Write(ctx context.Context, st EventScanner, req Request, w io.Writer) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var (
		n    int
		line []byte
		row  EventRow
		// enriched is the event with lookup properties added.
		enriched store.Event
		// asOf is the event as the filter sees it, with History properties.
		asOf store.Event
	)
	emit := func(stored *store.Event) error {
		e := stored
		if !req.Enrich.Empty() {
			enriched = *stored // reused: no allocation per event
			enriched.Props = req.Enrich.Apply(stored.Props)
			e = &enriched
		}
		if req.Where != nil {
			m := e
			if req.History != nil {
				props, err := req.History.Apply(ctx, e.DistinctID, e.TimeMs, e.Props)
				if err != nil {
					return err
				}
				asOf = *e
				asOf.Props, m = props, &asOf
			}
			row.Reset(m)
			if !req.Where.Match(&row) {
				return nil
			}
		}
		line = AppendEvent(line[:0], e, req.TimeInMs)
		if _, err := bw.Write(line); err != nil {
			return err
		}
		n++
		if req.Limit > 0 && n >= req.Limit {
			return errLimit
		}
		return nil
	}
	for d := req.From; !d.After(req.To); d = d.AddDate(0, 0, 1) {
		q := store.Scan{Project: req.Project, Resolve: true, FromMs: d.UnixMilli(), ToMs: d.AddDate(0, 0, 1).UnixMilli(), Events: req.Events}
		if req.Where == nil && req.Limit > 0 {
			q.Limit = req.Limit - n // the filter is in Go, so only push the limit down without one
		}
		err := st.ScanEvents(ctx, q, emit)
		if errors.Is(err, errLimit) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("export %s: %w", d.Format(time.DateOnly), err)
		}
		if err := bw.Flush(); err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}

var errLimit = errors.New("limit reached")

// AppendEvent writes one export line, newline included.
func AppendEvent(dst []byte, e *store.Event, timeInMs bool) []byte {
	dst = append(dst, `{"event":`...)
	dst = jsonw.String(dst, e.Name)
	dst = append(dst, `,"properties":{"time":`...)
	if timeInMs {
		dst = jsonw.Int(dst, e.TimeMs)
	} else {
		dst = jsonw.Int(dst, floorDiv(e.TimeMs, 1000))
	}
	dst = append(dst, `,"distinct_id":`...)
	dst = jsonw.String(dst, e.DistinctID)
	if e.InsertID != "" {
		dst = append(dst, `,"$insert_id":`...)
		dst = jsonw.String(dst, e.InsertID)
	}
	dst = append(dst, `,"mp_processing_time_ms":`...)
	dst = jsonw.Int(dst, e.IngestMs)
	if len(e.Props) >= 2 { // splice the object's members in after ours
		if inner := bytes.TrimSpace(e.Props[1 : len(e.Props)-1]); len(inner) > 0 {
			dst = append(dst, ',')
			dst = append(dst, inner...)
		}
	}
	return append(dst, "}}\n"...)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
