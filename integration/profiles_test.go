package integration

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/mixpanel/mixpanel-go"
)

// engageProfiles reads profiles back through POST /api/2.0/engage, the
// query API a customer would use, as id → $properties ($last_seen dropped).
func engageProfiles(t *testing.T, s *server, secret string, q url.Values) map[string]map[string]any {
	t.Helper()
	rep := s.do(t, request{Path: "/api/2.0/engage", Query: q, Auth: basicAuth(secret, "")})
	if rep.Status != 200 {
		t.Fatalf("engage query: %s", rep)
	}
	out := map[string]map[string]any{}
	results, _ := rep.JSON(t)["results"].([]any)
	for _, r := range results {
		m := r.(map[string]any)
		props, _ := m["$properties"].(map[string]any)
		delete(props, "$last_seen")
		id, _ := m["$distinct_id"].(string)
		if id == "" {
			id, _ = m["$group_id"].(string)
		}
		out[id] = props
	}
	return out
}

// TestSDKPeopleAndGroups drives every People* and Group* method of the
// official SDK against a running server and reads the profiles back.
func TestSDKPeopleAndGroups(t *testing.T) {
	s := startServer(t, defaultConfig())
	c := sdkClient(s)
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("PeopleSet", c.PeopleSet(ctx, []*mixpanel.PeopleProperties{
		mixpanel.NewPeopleProperties("ada", map[string]any{"name": "Ada", "plan": "free", "tmp": 1}),
		mixpanel.NewPeopleProperties("bob", map[string]any{"name": "Bob"}),
	}))
	must("PeopleSetOnce", c.PeopleSetOnce(ctx, []*mixpanel.PeopleProperties{
		mixpanel.NewPeopleProperties("ada", map[string]any{"name": "Not Ada", "first_seen": "2024-01-01"}),
	}))
	must("PeopleIncrement", c.PeopleIncrement(ctx, "ada", map[string]int{"logins": 2}))
	must("PeopleIncrement", c.PeopleIncrement(ctx, "ada", map[string]int{"logins": 3}))
	must("PeopleUnionProperty", c.PeopleUnionProperty(ctx, "ada", map[string]any{"tags": []any{"a", "b"}}))
	must("PeopleUnionProperty", c.PeopleUnionProperty(ctx, "ada", map[string]any{"tags": []any{"b", "c"}}))
	must("PeopleAppendListProperty", c.PeopleAppendListProperty(ctx, "ada", map[string]any{"events": "signup"}))
	must("PeopleRemoveListProperty", c.PeopleRemoveListProperty(ctx, "ada", map[string]any{"tags": "a"}))
	must("PeopleDeleteProperty", c.PeopleDeleteProperty(ctx, "ada", []string{"tmp"}))
	must("PeopleDeleteProfile", c.PeopleDeleteProfile(ctx, "bob", false))

	must("GroupSet", c.GroupSet(ctx, "company", "acme", map[string]any{"size": 10, "tier": "gold", "tmp": true}))
	must("GroupSetOnce", c.GroupSetOnce(ctx, "company", "acme", map[string]any{"size": 99, "founded": 1999}))
	must("GroupUnionListProperty", c.GroupUnionListProperty(ctx, "company", "acme", map[string]any{"regions": []any{"eu", "us"}}))
	must("GroupRemoveListProperty", c.GroupRemoveListProperty(ctx, "company", "acme", map[string]any{"regions": "us"}))
	must("GroupDeleteProperty", c.GroupDeleteProperty(ctx, "company", "acme", []string{"tmp"}))
	must("GroupSet", c.GroupSet(ctx, "company", "gone", map[string]any{"x": 1}))
	must("GroupDelete", c.GroupDelete(ctx, "company", "gone"))

	want := map[string]map[string]any{"ada": {
		"name": "Ada", "plan": "free", "first_seen": "2024-01-01", "logins": json.Number("5"),
		"tags": []any{"b", "c"}, "events": []any{"signup"},
	}}
	q := url.Values{"project_id": {"1"}}
	if got := engageProfiles(t, s, mainSecret, q); !reflect.DeepEqual(got, want) {
		t.Errorf("user profiles\n got %v\nwant %v", got, want)
	}
	q.Set("data_group_id", "company")
	wantGroups := map[string]map[string]any{"acme": {"size": json.Number("10"), "tier": "gold", "founded": json.Number("1999"), "regions": []any{"eu"}}}
	if got := engageProfiles(t, s, mainSecret, q); !reflect.DeepEqual(got, wantGroups) {
		t.Errorf("group profiles\n got %v\nwant %v", got, wantGroups)
	}
	// Durable on 2xx: a SIGKILL right after loses nothing.
	s.Kill()
	s.Start()
	if got := engageProfiles(t, s, mainSecret, url.Values{"project_id": {"1"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("after kill -9: user profiles\n got %v\nwant %v", got, want)
	}
}

// TestSDKAliasAndMergeAttribution: in an Original ID Merge project an SDK
// Alias and a $merge re-attribute events sent before them, in export and in
// profile reads.
func TestSDKAliasAndMergeAttribution(t *testing.T) {
	s := startServer(t, defaultConfig())
	c := mixpanel.NewApiClient(otherToken, mixpanel.ProxyApiLocation(s.URL), mixpanel.ProxyDataLocation(s.URL),
		mixpanel.HttpClient(httpClient), mixpanel.ApiSecret(otherSecret))
	ctx := context.Background()
	now := time.Now()
	var evs []*mixpanel.Event
	for i, id := range []string{"device-1", "user-1", "other-1"} {
		e := c.NewEvent("page_view", id, map[string]any{"n": i})
		e.AddTime(now.Add(-time.Duration(i+1) * time.Minute))
		e.AddInsertID(uid("attr"))
		evs = append(evs, e)
	}
	if err := c.Track(ctx, evs); err != nil {
		t.Fatalf("Track: %v", err)
	}
	if err := c.Alias(ctx, "device-1", "user-1"); err != nil {
		t.Fatalf("Alias: %v", err)
	}
	merge := []byte(`[{"event":"$merge","properties":{"$distinct_ids":["user-1","other-1"],"token":"` + otherToken + `"}}]`)
	if rep := s.do(t, request{Path: "/import", Body: merge, Auth: basicAuth(otherSecret, "")}); rep.Status != 200 {
		t.Fatalf("$merge import: %s", rep)
	}
	if err := c.PeopleSet(ctx, []*mixpanel.PeopleProperties{mixpanel.NewPeopleProperties("device-1", map[string]any{"via": "alias"})}); err != nil {
		t.Fatalf("PeopleSet: %v", err)
	}
	got, err := c.Export(ctx, now.Add(-48*time.Hour), now.Add(24*time.Hour), 0, "page_view", "")
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("export returned %d events, want 3", len(got))
	}
	for _, e := range got {
		if id, _ := e.Properties["distinct_id"].(string); id != "user-1" {
			t.Errorf("event %v exported with distinct_id %q, want the canonical user-1", e.Properties["n"], id)
		}
	}
	profiles := engageProfiles(t, s, otherSecret, url.Values{"project_id": {"3"}, "distinct_id": {"other-1"}})
	if !reflect.DeepEqual(profiles, map[string]map[string]any{"user-1": {"via": "alias"}}) {
		t.Errorf("profile by a merged id: %v, want user-1's", profiles)
	}
}
