package api

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// The HTTP behaviour of /track is covered over real HTTP in
// integration/track_test.go; these pin the pure pieces.

func TestGroupByToken(t *testing.T) {
	a := &config.Project{ID: 1, Token: "ta"}
	b := &config.Project{ID: 2, Token: "tb"}
	lookup := func(tok string) (*config.Project, bool) {
		p, ok := map[string]*config.Project{"ta": a, "tb": b}[tok]
		return p, ok
	}
	recs := [][]byte{
		[]byte(`{"event":"x","properties":{"token":"ta"}}`),
		[]byte(`{"event":"x","properties":{"token":"zz","$insert_id":"id1"}}`),
		[]byte(`{"event":"x","properties":{"token":"tb","distinct_id":"u"}}`),
		[]byte(`{"event":"x","properties":{}}`),
		[]byte(`{"event":"x","properties":{"token":"ta","distinct_id":null}}`),
		[]byte(`{"event":"x"`),
	}
	groups, fails := groupByToken(recs, "10.0.0.1", lookup)
	if len(groups) != 2 || groups[0].project != a || groups[1].project != b {
		t.Fatalf("groups %+v", groups)
	}
	if got := groups[0].idx; len(got) != 2 || got[0] != 0 || got[1] != 4 {
		t.Errorf("project a indexes %v, want [0 4]", got)
	}
	// ip=1 fills a missing or null distinct_id and leaves a present one.
	for _, r := range groups[0].recs {
		if !strings.Contains(string(r), `"distinct_id":"10.0.0.1"`) {
			t.Errorf("no IP distinct_id in %s", r)
		}
	}
	if string(groups[1].recs[0]) != string(recs[2]) {
		t.Errorf("record with a distinct_id was rewritten: %s", groups[1].recs[0])
	}
	if len(fails) != 3 || fails[0].Index != 1 || fails[0].InsertID != "id1" || fails[0].Field != "properties.token" ||
		fails[1].Index != 3 || fails[2].Index != 5 {
		t.Errorf("failures %+v", fails)
	}
}

func TestParseTrack(t *testing.T) {
	cases := []struct {
		name, method, target, ct, body, want string
		verbose                              bool
	}{
		{"json body", "POST", "/track?verbose=1", "application/json", `[{"a":1}]`, `[{"a":1}]`, true},
		{"form base64", "POST", "/track", "application/x-www-form-urlencoded", "data=" + url.QueryEscape("eyJhIjoxfQ=="), `{"a":1}`, false},
		{"form raw, verbose in form", "POST", "/track", "application/x-www-form-urlencoded", "verbose=1&data=" + url.QueryEscape(`[{"a":1}]`), `[{"a":1}]`, true},
		{"form without content type", "POST", "/track", "", "data=eyJhIjoxfQ", `{"a":1}`, false},
		{"GET", "GET", "/track?data=eyJhIjoxfQ%3D%3D&verbose=1", "", "", `{"a":1}`, true},
		{"POST empty body, query data", "POST", "/track?data=" + url.QueryEscape(`{"a":1}`), "", "", `{"a":1}`, false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		if c.ct != "" {
			r.Header.Set("Content-Type", c.ct)
		}
		tr, err := parseTrack(r, []byte(c.body))
		if err != nil || string(tr.body) != c.want || tr.verbose != c.verbose {
			t.Errorf("%s: body %q verbose %v err %v; want %q verbose %v", c.name, tr.body, tr.verbose, err, c.want, c.verbose)
		}
	}
	r := httptest.NewRequest("GET", "/track?ip=1", nil)
	if _, err := parseTrack(r, nil); err == nil {
		t.Error("GET without data parsed")
	}
}

func TestDropOld(t *testing.T) {
	b := store.Batch{
		Events: []store.Event{{TimeMs: 5}, {TimeMs: 10}, {TimeMs: 4}, {TimeMs: 11}},
		Changes: []store.Change{
			{Event: 0, Ref: 0}, {Event: 3, Ref: 3}, {Event: -1, Ref: 9},
		},
	}
	n := dropOldWithChanges(&b, 10)
	if n != 2 || len(b.Events) != 2 || b.Events[0].TimeMs != 10 || b.Events[1].TimeMs != 11 {
		t.Errorf("kept %+v dropped %d", b.Events, n)
	}
	// The change of a dropped event goes with it; the others follow theirs.
	if len(b.Changes) != 2 || b.Changes[0].Event != 1 || b.Changes[0].Ref != 3 || b.Changes[1].Event != -1 {
		t.Errorf("changes %+v", b.Changes)
	}
}
