package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

type segReply struct {
	Data struct {
		Series []string                          `json:"series"`
		Values map[string]map[string]json.Number `json:"values"`
	} `json:"data"`
	LegendSize json.Number `json:"legend_size"`
}

func segmentation(t *testing.T, e *queryEnv, secret string, q url.Values) segReply {
	t.Helper()
	var out segReply
	e.call(http.MethodGet, "/api/query/segmentation", q, secret, "").decode(t, &out)
	return out
}

// flat renders values as "segment:date=n …" for the non-zero cells, sorted.
func (r segReply) flat() string {
	var parts []string
	for _, d := range r.Data.Series {
		for _, seg := range sortedKeys(r.Data.Values) {
			if n := r.Data.Values[seg][d]; n != "0" {
				parts = append(parts, fmt.Sprintf("%s:%s=%s", seg, d, n))
			}
		}
	}
	return strings.Join(parts, " ")
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

var segDay = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

func at(day, hour, minute int) int64 {
	return segDay.AddDate(0, 0, day).Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute).UnixMilli()
}

func seedSegmentation(t *testing.T, e *queryEnv) {
	t.Helper()
	ev := func(name, user string, ms int64, id, props string) store.Event {
		return storetest.NewEvent(qSimple, name, user, ms, id, props)
	}
	events := []store.Event{
		ev("purchase", "u1", at(0, 10, 15), "i1", `{"plan":"pro","item_id":"sku-1"}`),
		ev("purchase", "u1", at(0, 10, 45), "i2", `{"plan":"pro","item_id":"sku-2"}`),
		ev("purchase", "u2", at(0, 11, 5), "i3", `{"plan":"free","item_id":42}`),
		ev("purchase", "u3", at(1, 0, 30), "i4", `{"plan":"pro","$warehouse_import_id":"imp-1"}`),
		ev("signup", "u1", at(0, 9, 0), "i5", `{"plan":"pro"}`),
		ev("purchase", "u9", at(2, 0, 0), "i6", `{"plan":"pro"}`), // after to_date
	}
	e.write(store.Batch{Project: qSimple, Events: events})
	// The same event again, in a later write: stored once, counted once.
	if res := e.write(store.Batch{Project: qSimple, Events: events[:1]}); res.Duplicates != 1 {
		t.Fatalf("duplicate not detected: %+v", res)
	}
	e.lookupTable(qSimple, "items", "id,price,category\nsku-1,10,books\nsku-2,20,games\n42,5,toys\n")
}

func TestSegmentation(t *testing.T) {
	e := newQueryEnv(t)
	seedSegmentation(t, e)
	base := url.Values{"event": {"purchase"}, "from_date": {"2024-03-01"}, "to_date": {"2024-03-02"}}
	with := func(kv ...string) url.Values {
		q := url.Values{}
		for k, v := range base {
			q[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return q
	}
	cases := []struct {
		name string
		q    url.Values
		want string
	}{
		{"general per day", with(), "purchase:2024-03-01=3 purchase:2024-03-02=1"},
		{"unique per day", with("type", "unique"), "purchase:2024-03-01=2 purchase:2024-03-02=1"},
		{"average per day", with("type", "average"), "purchase:2024-03-01=1.5 purchase:2024-03-02=1"},
		{"on plan, unique", with("on", `properties["plan"]`, "type", "unique"),
			"free:2024-03-01=1 pro:2024-03-01=1 pro:2024-03-02=1"},
		{"where + on, per hour", with("unit", "hour", "where", `properties["plan"] == "pro"`, "on", `properties["plan"]`),
			"pro:2024-03-01 10:00:00=2 pro:2024-03-02 00:00:00=1"},
		{"warehouse import filter", with("where", `properties["$warehouse_import_id"] == "imp-1"`), "purchase:2024-03-02=1"},
		{"on a lookup property", with("on", `properties["item_id.category"]`),
			"books:2024-03-01=1 games:2024-03-01=1 toys:2024-03-01=1 undefined:2024-03-02=1"},
		{"where on a lookup property", with("where", `properties["item_id.price"] >= 10`), "purchase:2024-03-01=2"},
		{"limit keeps the largest", with("on", `properties["plan"]`, "limit", "1"), "pro:2024-03-01=2 pro:2024-03-02=1"},
		{"no events: zeros", with("event", "refund"), ""},
	}
	for _, c := range cases {
		r := segmentation(t, e, qSecret1, c.q)
		if got := r.flat(); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		if fmt.Sprint(len(r.Data.Values)) != r.LegendSize.String() {
			t.Errorf("%s: legend_size %s for %d segments", c.name, r.LegendSize, len(r.Data.Values))
		}
	}

	r := segmentation(t, e, qSecret1, with("unit", "hour"))
	if len(r.Data.Series) != 48 || r.Data.Series[0] != "2024-03-01 00:00:00" || r.Data.Series[47] != "2024-03-02 23:00:00" {
		t.Errorf("hour series: %v", r.Data.Series)
	}
	if v := r.Data.Values["purchase"]; len(v) != 48 || v["2024-03-01 00:00:00"] != "0" {
		t.Errorf("every bucket, zeros included: %v", v)
	}
	if r := segmentation(t, e, qSecret1, with("event", "refund")); r.Data.Values["refund"]["2024-03-01"] != "0" || r.LegendSize != "1" {
		t.Errorf("an event without data: %+v", r)
	}
	// A replaced lookup table shows at the next query.
	e.lookupTable(qSimple, "items", "id,category\nsku-1,comics\n")
	if got := segmentation(t, e, qSecret1, with("on", `properties["item_id.category"]`)).flat(); got != "comics:2024-03-01=1 undefined:2024-03-01=2 undefined:2024-03-02=1" {
		t.Errorf("after replacing the lookup table: %s", got)
	}
}

func TestSegmentationIdentity(t *testing.T) {
	e := newQueryEnv(t)
	e.write(store.Batch{Project: qOriginal, Events: []store.Event{
		storetest.NewEvent(qOriginal, "view", "anon-1", at(0, 1, 0), "a", `{}`),
		storetest.NewEvent(qOriginal, "view", "user-1", at(0, 2, 0), "b", `{}`),
	}})
	q := url.Values{"event": {"view"}, "from_date": {"2024-03-01"}, "to_date": {"2024-03-01"}, "type": {"unique"}}
	if got := segmentation(t, e, qSecret2, q).flat(); got != "view:2024-03-01=2" {
		t.Fatalf("before the merge: %s", got)
	}
	e.write(store.Batch{Project: qOriginal, Merges: []store.Merge{{DistinctIDs: [2]string{"user-1", "anon-1"}, Props: []byte(`{}`)}}})
	if got := segmentation(t, e, qSecret2, q).flat(); got != "view:2024-03-01=1" {
		t.Errorf("after the merge one user: %s", got)
	}
}

func TestSegmentationErrors(t *testing.T) {
	e := newQueryEnv(t)
	ok := url.Values{"event": {"e"}, "from_date": {"2024-03-01"}, "to_date": {"2024-03-02"}}
	bad := func(k, v string) url.Values {
		q := url.Values{}
		for kk, vv := range ok {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return q
	}
	cases := []struct {
		q    url.Values
		want string
	}{
		{bad("where", `properties["plan"] == "pro" and`), "position 31"},
		{bad("on", `properties["plan"] == 1`), "invalid on expression: where: position 19"},
		{bad("event", ""), "event is required"},
		{bad("from_date", "2024/03/01"), "from_date must be a date"},
		{bad("to_date", "2024-02-01"), "before from_date"},
		{bad("unit", "minute"), "unit must be"},
		{bad("type", "sum"), "type must be"},
		{bad("limit", "0"), "limit must be"},
		{bad("to_date", "2026-03-01"), "buckets"},
	}
	for _, c := range cases {
		if c.want == "buckets" {
			c.q.Set("unit", "hour")
		}
		r := e.call(http.MethodGet, "/api/query/segmentation", c.q, qSecret1, "")
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%v: want 400 with %q, got %d %s", c.q, c.want, r.Status, r.Body)
		}
	}
}
