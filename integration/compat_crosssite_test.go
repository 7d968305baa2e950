package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestCompatCrossSiteCredentials: a page of another site can make a
// browser re-send Basic credentials it once used on this host (a form
// POST or an <img> needs no preflight). Those credentials never name the
// project of a token-less /engage or /groups update and never reach
// /import; the same requests from a server-side SDK (no Origin) work.
func TestCompatCrossSiteCredentials(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	const evil = "https://evil.example"
	form := func(kv ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	update := func(path string, upd any, hdr map[string]string) reply {
		q := projectQ(mainID)
		q.Set("verbose", "1")
		return s.do(t, request{Path: path, Query: q, Auth: asOwner, Header: hdr,
			Body: []byte("data=" + url.QueryEscape(b64(mustJSON(t, upd))))})
	}
	set := func(id string) map[string]any {
		return map[string]any{"$distinct_id": id, "$set": map[string]any{"plan": "stolen"}}
	}

	// A server-side SDK (no Origin) with the owner's credentials: stored.
	wantVerbose(t, update("/engage", map[string]any{"$distinct_id": "victim", "$set": map[string]any{"plan": "pro"}}, form()), 1)
	// The same credentials, sent by a browser for another site.
	for _, c := range []struct {
		name, path string
		upd        map[string]any
		hdr        map[string]string
	}{
		{"engage, Origin of another site", "/engage/", set("xs-1"), form("Origin", evil)},
		{"engage, Sec-Fetch-Site cross-site", "/engage", set("xs-2"), form("Sec-Fetch-Site", "cross-site", "Origin", evil)},
		{"engage, $delete", "/engage", map[string]any{"$distinct_id": "victim", "$delete": ""}, form("Origin", evil)},
		{"groups, Origin of another site", "/groups/", map[string]any{"$group_key": "company", "$group_id": "xs-co", "$set": map[string]any{"a": 1}},
			form("Origin", evil)},
	} {
		r := update(c.path, c.upd, c.hdr)
		if msg := wantVerbose(t, r, 0); !strings.Contains(msg, "browsers must send the project token in $token") {
			t.Errorf("%s: %q", c.name, msg)
		}
	}
	wantVerbose(t, update("/engage", set("srv-1"), form()), 1)
	if ps := engageProfiles(t, s, mainSecret, url.Values{"distinct_ids": {`["xs-1","xs-2","victim","srv-1"]`}}); len(ps["xs-1"]) != 0 || len(ps["xs-2"]) != 0 ||
		ps["victim"]["plan"] != "pro" || ps["srv-1"]["plan"] != "stolen" {
		t.Errorf("profiles %v; want victim (not deleted) and srv-1 only", ps)
	}
	if g := engageProfiles(t, s, mainSecret, url.Values{"data_group_id": {"company"}}); g["xs-co"] != nil {
		t.Errorf("group profile written cross-site: %v", g["xs-co"])
	}

	// GET /import?data= as an <img> would send it, and a form POST.
	ev := func(name string) string {
		return b64(mustJSON(t, event(name, "u", uid("x"), time.Now().Add(-time.Hour), nil)))
	}
	imp := func(method, name string, hdr map[string]string) reply {
		rq := request{Method: method, Path: "/import", Auth: asSecret, Header: hdr}
		if method == http.MethodGet {
			rq.Query = url.Values{"data": {ev(name)}}
		} else {
			rq.Body = []byte("data=" + url.QueryEscape(ev(name)))
		}
		return s.do(t, rq)
	}
	for _, c := range []struct {
		name string
		r    reply
		want int
	}{
		{"<img> GET, Sec-Fetch-Site cross-site", imp(http.MethodGet, "img", map[string]string{"Sec-Fetch-Site": "cross-site"}), 403},
		{"GET with another Origin", imp(http.MethodGet, "img origin", map[string]string{"Origin": evil}), 403},
		{"form POST from another site", imp(http.MethodPost, "form", form("Origin", evil, "Sec-Fetch-Site", "cross-site")), 403},
		{"Node SDK import(): GET, no browser headers", imp(http.MethodGet, "node", nil), 200},
	} {
		if c.r.Status != c.want || c.want == 403 && !strings.Contains(string(c.r.Body), "/import does not take requests a browser sends from another site") {
			t.Errorf("%s: %s, want %d", c.name, c.r, c.want)
		}
	}
	got := distinctIDsByEvent(t, s, mainSecret)
	if len(got["img"])+len(got["img origin"])+len(got["form"]) != 0 || len(got["node"]) != 1 {
		t.Errorf("stored %v; want only the Node SDK's event", got)
	}
	// A token-less $merge by <img> on an Original project is refused too.
	q := url.Values{"data": {`{"event":"$merge","properties":{"$distinct_ids":["a","b"]}}`}}
	r := s.do(t, request{Method: http.MethodGet, Path: "/import", Query: q, Auth: basicAuth(otherSecret, ""),
		Header: map[string]string{"Sec-Fetch-Site": "same-site"}})
	if r.Status != http.StatusForbidden {
		t.Errorf("$merge by GET from the same site: %s, want 403", r)
	}
	if fmt.Sprint(r.Header.Values("Access-Control-Allow-Origin")) != "[]" {
		t.Errorf("/import answered with CORS headers: %v", r.Header)
	}
}
