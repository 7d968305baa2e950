package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
)

type engageReply struct {
	Page      json.Number `json:"page"`
	PageSize  json.Number `json:"page_size"`
	SessionID string      `json:"session_id"`
	Status    string      `json:"status"`
	Total     json.Number `json:"total"`
	Results   []struct {
		ID    string         `json:"$distinct_id"`
		Props map[string]any `json:"$properties"`
	} `json:"results"`
}

func (r engageReply) ids() string {
	var ids []string
	for _, x := range r.Results {
		ids = append(ids, x.ID)
	}
	return strings.Join(ids, ",")
}

func engage(t *testing.T, e *queryEnv, q url.Values) engageReply {
	t.Helper()
	var out engageReply
	e.call(http.MethodPost, "/api/2.0/engage", q, qSecret1, "").decode(t, &out)
	return out
}

func TestEngageQuery(t *testing.T) {
	e := newQueryEnv(t)
	e.setProfile(qSimple, "", "ada", `{"$email":"ada@example.com","plan":"pro","age":36}`)
	e.setProfile(qSimple, "", "bob", `{"$email":"bob@example.com","plan":"free","age":20}`)
	e.setProfile(qSimple, "", "cyd", `{"plan":"pro","age":50}`)
	e.lookupTable(qSimple, "plans", "name,seats,price\npro,10,99.5\nfree,1,0\n")

	all := engage(t, e, url.Values{})
	if all.ids() != "ada,bob,cyd" || all.Status != "ok" || all.Total != "3" || all.PageSize != "1000" || all.Page != "0" || all.SessionID == "" {
		t.Fatalf("all profiles: %+v", all)
	}
	// A user lookup table (maps_to user, property plan) enriches profiles.
	if p := all.Results[0].Props; p["plan.seats"] != json.Number("10") || p["plan.price"] != json.Number("99.5") || p["$email"] != "ada@example.com" {
		t.Errorf("ada's properties: %v", p)
	}

	if r := engage(t, e, url.Values{"distinct_id": {"bob"}}); r.ids() != "bob" || r.Total != "1" {
		t.Errorf("by distinct_id: %+v", r)
	}
	if r := engage(t, e, url.Values{"distinct_ids": {`["cyd","ada","nobody"]`}}); r.ids() != "ada,cyd" {
		t.Errorf("by distinct_ids: %+v", r)
	}
	if r := engage(t, e, url.Values{"distinct_ids": {`[]`}}); r.Total != "0" || len(r.Results) != 0 {
		t.Errorf("empty distinct_ids matched %+v", r)
	}
	r := engage(t, e, url.Values{"where": {`properties["plan"] == "pro" and properties["age"] > 40`}})
	if r.ids() != "cyd" {
		t.Errorf("where: %+v", r)
	}
	// where sees lookup properties too.
	if r := engage(t, e, url.Values{"where": {`user["plan.seats"] >= 10`}}); r.ids() != "ada,cyd" {
		t.Errorf("where on an enriched property: %+v", r)
	}
	r = engage(t, e, url.Values{"output_properties": {`["$email","plan.price","missing"]`}, "distinct_id": {"ada"}})
	if len(r.Results) != 1 || fmt.Sprint(r.Results[0].Props) != "map[$email:ada@example.com plan.price:99.5]" {
		t.Errorf("output_properties: %+v", r.Results)
	}

	// Service account + project_id in the form body; GET with the query string.
	var sa engageReply
	e.call(http.MethodPost, "/api/query/engage", url.Values{"project_id": {"1"}, "distinct_id": {"ada"}}, qAnalyst, qAnalystS).decode(t, &sa)
	if sa.ids() != "ada" {
		t.Errorf("service account: %+v", sa)
	}
	var get engageReply
	e.call(http.MethodGet, "/api/2.0/engage", url.Values{"distinct_id": {"cyd"}}, qSecret1, "").decode(t, &get)
	if get.ids() != "cyd" {
		t.Errorf("GET: %+v", get)
	}
}

func TestEngageErrors(t *testing.T) {
	e := newQueryEnv(t)
	cases := []struct {
		q    url.Values
		want string
	}{
		{url.Values{"where": {`properties["plan"] = "pro"`}}, "position 19"},
		{url.Values{"distinct_ids": {`"ada"`}}, "distinct_ids must be a JSON array"},
		{url.Values{"output_properties": {`$email`}}, "output_properties must be"},
		{url.Values{"page": {"1"}}, "session_id"},
		{url.Values{"page": {"1"}, "session_id": {"bogus"}}, "different query"},
		{url.Values{"filter_by_cohort": {`{"id":1}`}}, "not supported"},
	}
	for _, c := range cases {
		r := e.call(http.MethodPost, "/api/2.0/engage", c.q, qSecret1, "")
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("%v: want 400 with %q, got %d %s", c.q, c.want, r.Status, r.Body)
		}
	}
	if r := e.call(http.MethodPost, "/api/2.0/engage", url.Values{}, "wrong", ""); r.Status != http.StatusUnauthorized {
		t.Errorf("bad secret: %d %s", r.Status, r.Body)
	}
	if r := e.call(http.MethodDelete, "/api/2.0/engage", url.Values{}, qSecret1, ""); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d %s", r.Status, r.Body)
	}
}

func TestEngagePaging(t *testing.T) {
	e := newQueryEnv(t)
	const n = 2345
	var ups []store.ProfileUpdate
	for i := range n {
		ups = append(ups, e.profileUpdate("", fmt.Sprintf("u%05d", i), fmt.Sprintf(`{"i":%d,"even":%t}`, i, i%2 == 0)))
	}
	e.write(store.Batch{Project: qSimple, Profiles: ups})

	first := engage(t, e, url.Values{})
	if first.Total != json.Number(fmt.Sprint(n)) || len(first.Results) != engagePageSize || first.Results[0].ID != "u00000" {
		t.Fatalf("page 0: total %s, %d results", first.Total, len(first.Results))
	}
	seen := map[string]bool{}
	for page := 0; ; page++ {
		q := url.Values{"page": {fmt.Sprint(page)}, "session_id": {first.SessionID}}
		r := engage(t, e, q)
		if r.Page != json.Number(fmt.Sprint(page)) || r.SessionID != first.SessionID || r.Total != first.Total {
			t.Fatalf("page %d header: %+v", page, r)
		}
		if len(r.Results) == 0 {
			break
		}
		for _, x := range r.Results {
			if seen[x.ID] {
				t.Fatalf("%s on two pages", x.ID)
			}
			seen[x.ID] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("paged through %d profiles, want %d", len(seen), n)
	}
	// A filtered query pages over its matches only, with its own session.
	even := engage(t, e, url.Values{"where": {`properties["even"] == true`}})
	if even.Total != "1173" || even.SessionID == first.SessionID {
		t.Fatalf("filtered: total %s session %s", even.Total, even.SessionID)
	}
	p1 := engage(t, e, url.Values{"where": {`properties["even"] == true`}, "page": {"1"}, "session_id": {even.SessionID}})
	if len(p1.Results) != 173 || p1.Results[0].ID != "u02000" {
		t.Fatalf("filtered page 1: %d results, first %v", len(p1.Results), p1.Results[0].ID)
	}
}

func TestEngageGroupsAndIdentity(t *testing.T) {
	e := newQueryEnv(t)
	e.setProfile(qSimple, "company_id", "acme", `{"name":"Acme","size":500}`)
	e.setProfile(qSimple, "company_id", "initech", `{"name":"Initech","size":20}`)
	e.setProfile(qSimple, "team_id", "acme", `{"name":"not a company"}`)

	r := engage(t, e, url.Values{"data_group_id": {"company_id"}})
	if r.ids() != "acme,initech" || r.Results[0].Props["name"] != "Acme" {
		t.Errorf("groups: %+v", r)
	}
	r = engage(t, e, url.Values{"data_group_id": {"company_id"}, "where": {`properties["size"] < 100`}})
	if r.ids() != "initech" {
		t.Errorf("groups with where: %+v", r)
	}
	r = engage(t, e, url.Values{"data_group_id": {"team_id"}, "distinct_id": {"acme"}})
	if r.ids() != "acme" || r.Results[0].Props["name"] != "not a company" {
		t.Errorf("group by id: %+v", r)
	}

	// Original ID Merge: a profile set on the anonymous id before a merge is
	// found by either id afterwards, under the canonical id.
	e.setProfile(qOriginal, "", "anon-1", `{"first_seen":"web"}`)
	e.write(store.Batch{Project: qOriginal, Merges: []store.Merge{{DistinctIDs: [2]string{"user-1", "anon-1"}, Props: []byte(`{}`)}}})
	canonical, err := e.st.Resolve(t.Context(), qOriginal, "anon-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"anon-1", "user-1"} {
		var got engageReply
		e.call(http.MethodPost, "/api/2.0/engage", url.Values{"distinct_id": {id}}, qSecret2, "").decode(t, &got)
		if got.ids() != canonical || got.Results[0].Props["first_seen"] != "web" {
			t.Errorf("lookup by %s after merge: want the profile of %s, got %s", id, canonical, got.ids())
		}
	}
}
