package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// The query APIs end to end: what a user runs to validate a warehouse
// import (segmentation filtered by $warehouse_import_id, spec §8), the
// event-name list that hides history older than 30 days, and the profile
// query, each response checked against the public Query API document. The
// document types engage's $distinct_id as an integer; distinct_ids are
// strings throughout the spec, so the test expects a string.

func TestQueryAPIs(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	doc, router := loadSpec(t, "query.openapi.yaml", s.URL+"/api/query")
	item := doc.Paths.Value("/engage").Post.Responses.Status(200).Value.Content["application/json"].Schema.Value.Properties["results"].Value.Items.Value
	item.Properties["$distinct_id"].Value.Type = &openapi3.Types{openapi3.TypeString}

	day := time.Now().UTC().AddDate(0, 0, -1).Truncate(24 * time.Hour).Add(12 * time.Hour)
	imported := []map[string]any{
		event("wh_orders", "cust-1", uid("w"), day, map[string]any{"$warehouse_import_id": "imp-7", "plan": "pro"}),
		event("wh_orders", "cust-2", uid("w"), day.Add(time.Minute), map[string]any{"$warehouse_import_id": "imp-7", "plan": "free"}),
		event("wh_orders", "cust-2", uid("w"), day.Add(2*time.Minute), map[string]any{"$warehouse_import_id": "imp-8"}),
		event("old_history", "cust-1", uid("w"), time.Now().AddDate(0, 0, -40), nil),
	}
	wantImported(t, s.importEvents(t, asSecret, nil, imported), 4)
	wantImported(t, s.importEvents(t, asSecret, nil, imported[:2]), 2) // a retried batch: deduplicated

	date := day.Format(time.DateOnly)
	q := url.Values{"project_id": {fmt.Sprint(mainID)}, "event": {"wh_orders"}, "from_date": {date}, "to_date": {date},
		"where": {`properties["$warehouse_import_id"] == "imp-7"`}, "on": {`properties["plan"]`}}
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/query/segmentation", Query: q, Auth: asOwner})
	checkResponse(t, router, http.MethodGet, s.URL+"/api/query/segmentation?"+q.Encode(), r)
	var seg struct {
		Data struct {
			Values map[string]map[string]int `json:"values"`
		} `json:"data"`
		LegendSize int `json:"legend_size"`
	}
	if err := json.Unmarshal(r.Body, &seg); err != nil || r.Status != http.StatusOK {
		t.Fatalf("segmentation: %s", r)
	}
	if seg.LegendSize != 2 || seg.Data.Values["pro"][date] != 1 || seg.Data.Values["free"][date] != 1 {
		t.Errorf("import imp-7 by plan: %s", r.Body)
	}

	q = url.Values{"project_id": {fmt.Sprint(mainID)}, "type": {"general"}}
	r = s.do(t, request{Method: http.MethodGet, Path: "/api/query/events/names", Query: q, Auth: asOwner})
	checkResponse(t, router, http.MethodGet, s.URL+"/api/query/events/names?"+q.Encode(), r)
	var names []string
	if err := json.Unmarshal(r.Body, &names); err != nil || !slices.Contains(names, "wh_orders") || slices.Contains(names, "old_history") {
		t.Errorf("event names (history older than 30 days hidden): %s", r)
	}

	up := []map[string]any{{"$token": mainToken, "$distinct_id": "cust-1", "$set": map[string]any{"plan": "pro"}}}
	if r := s.do(t, request{Path: "/engage", Query: url.Values{"verbose": {"1"}}, Body: mustJSON(t, up)}); r.Status != http.StatusOK {
		t.Fatalf("/engage update: %s", r)
	}
	form := url.Values{"project_id": {fmt.Sprint(mainID)}, "distinct_ids": {`["cust-1","cust-2"]`}}
	r = s.do(t, request{Method: http.MethodPost, Path: "/api/query/engage", Auth: asOwner,
		Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, Body: []byte(form.Encode())})
	checkResponse(t, router, http.MethodPost, s.URL+"/api/query/engage", r)
	m := r.JSON(t)
	res, _ := m["results"].([]any)
	if m["status"] != "ok" || len(res) != 1 || res[0].(map[string]any)["$distinct_id"] != "cust-1" {
		t.Errorf("engage query: %s", r)
	}
}
