package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/storetest"
)

func TestEventNames(t *testing.T) {
	e := newQueryEnv(t)
	now := time.Now()
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	e.write(store.Batch{Project: qSimple, Events: []store.Event{
		storetest.NewEvent(qSimple, "often", "u1", ms(time.Hour), "a1", `{}`),
		storetest.NewEvent(qSimple, "often", "u1", ms(2*time.Hour), "a2", `{}`),
		storetest.NewEvent(qSimple, "often", "u1", ms(3*time.Hour), "a3", `{}`),
		storetest.NewEvent(qSimple, "by-many", "u1", ms(48*time.Hour), "b1", `{}`),
		storetest.NewEvent(qSimple, "by-many", "u2", ms(29*24*time.Hour), "b2", `{}`),
		// Imported history older than 30 days stays out of the list.
		storetest.NewEvent(qSimple, "old-import", "u1", ms(31*24*time.Hour), "c1", `{}`),
		storetest.NewEvent(qSimple, "old-import", "u1", ms(400*24*time.Hour), "c2", `{}`),
	}})
	names := func(q url.Values) string {
		t.Helper()
		var out []string
		e.call(http.MethodGet, "/api/query/events/names", q, qSecret1, "").decode(t, &out)
		return strings.Join(out, ",")
	}
	cases := []struct {
		q    url.Values
		want string
	}{
		{url.Values{}, "often,by-many"},
		{url.Values{"type": {"general"}}, "often,by-many"},
		{url.Values{"type": {"unique"}}, "by-many,often"},
		{url.Values{"type": {"average"}}, "often,by-many"},
		{url.Values{"limit": {"1"}}, "often"},
	}
	for _, c := range cases {
		if got := names(c.q); got != c.want {
			t.Errorf("%v: got %s, want %s", c.q, got, c.want)
		}
	}
	if r := e.call(http.MethodGet, "/api/2.0/events/names", url.Values{"type": {"top"}}, qSecret1, ""); r.Status != http.StatusBadRequest {
		t.Errorf("bad type: %d %s", r.Status, r.Body)
	}
}

// TestExportResolvesAndEnriches: raw export reports canonical distinct_ids
// after a merge and carries lookup-table properties.
func TestExportResolvesAndEnriches(t *testing.T) {
	e := newQueryEnv(t)
	e.write(store.Batch{Project: qOriginal, Events: []store.Event{
		storetest.NewEvent(qOriginal, "view", "anon-1", at(0, 1, 0), "a", `{"x":1}`),
		storetest.NewEvent(qOriginal, "view", "user-1", at(0, 2, 0), "b", `{"x":1}`),
	}})
	e.write(store.Batch{Project: qOriginal, Merges: []store.Merge{{DistinctIDs: [2]string{"user-1", "anon-1"}, Props: []byte(`{}`)}}})
	canonical, err := e.st.Resolve(t.Context(), qOriginal, "anon-1")
	if err != nil {
		t.Fatal(err)
	}
	seedSegmentation(t, e)
	export := func(secret string, q url.Values) []map[string]any {
		t.Helper()
		r := e.call(http.MethodGet, "/api/2.0/export", q, secret, "")
		if r.Status != http.StatusOK {
			t.Fatalf("export: %d %s", r.Status, r.Body)
		}
		var out []map[string]any
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m["properties"].(map[string]any))
		}
		return out
	}
	day := url.Values{"from_date": {"2024-03-01"}, "to_date": {"2024-03-01"}}
	got := export(qSecret2, day)
	if len(got) != 2 || got[0]["distinct_id"] != canonical || got[1]["distinct_id"] != canonical || got[0]["x"] != 1.0 {
		t.Errorf("export after merge: %v (canonical %s)", got, canonical)
	}
	q := url.Values{"from_date": {"2024-03-01"}, "to_date": {"2024-03-01"}, "where": {`properties["item_id.category"] == "games"`}}
	got = export(qSecret1, q)
	if len(got) != 1 || got[0]["item_id"] != "sku-2" || got[0]["item_id.price"] != 20.0 {
		t.Errorf("enriched export: %v", got)
	}
}
