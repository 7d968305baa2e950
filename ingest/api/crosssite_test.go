package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestCrossSiteBrowser(t *testing.T) {
	tests := []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"server-side client: no Origin, no Sec-Fetch-Site", nil, false},
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
		{"Sec-Fetch-Site same-site", map[string]string{"Sec-Fetch-Site": "same-site"}, true},
		{"Sec-Fetch-Site same-origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://ingest.example"}, false},
		{"Sec-Fetch-Site none: typed into the address bar", map[string]string{"Sec-Fetch-Site": "none"}, false},
		{"Sec-Fetch-Site wins over an Origin a proxy's Host does not match", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://public.example"}, false},
		{"Origin of another host", map[string]string{"Origin": "https://evil.example"}, true},
		{"Origin of the same host, other port", map[string]string{"Origin": "https://ingest.example:8443"}, true},
		{"Origin of this host", map[string]string{"Origin": "https://INGEST.example"}, false},
		{"Origin null", map[string]string{"Origin": "null"}, true},
		{"Origin malformed", map[string]string{"Origin": "%zz"}, true},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(http.MethodPost, "https://ingest.example/engage", nil)
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		if got := crossSiteBrowser(r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCrossSiteCredentials: a page of another site can make the browser
// send Basic credentials it once used on this host. They never name the
// project of a token-less /engage or /groups update, and /import refuses
// such requests; server-side clients (no Origin) work as before.
func TestCrossSiteCredentials(t *testing.T) {
	e := newIngestEnv(t)
	const evil = "https://evil.example"
	const browserMsg = "'$token' is invalid: missing; browsers must send the project token in $token"
	owner := iOwner + ":" + iOwnerS
	hdr := func(basic string, kv ...string) map[string]string {
		h := map[string]string{"basic": basic, "Content-Type": formCT}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	set := func(id string) string {
		return "data=" + url.QueryEscape(fmt.Sprintf(`{"$distinct_id":%q,"$set":{"plan":"pro"}}`, id))
	}
	profiles := []struct {
		name, target string
		hdr          map[string]string
		body         string
		answer       string // exact, or with contains
		contains     string
		stored       string // the profile that must exist afterwards, or must not
	}{
		{"owner credentials from another origin", "/engage/?verbose=1&project_id=1", hdr(owner, "Origin", evil), set("x1"), "", browserMsg, ""},
		{"secret from another origin", "/engage?verbose=1", hdr(iSecS+":", "Origin", evil), set("x2"), "", browserMsg, ""},
		{"Sec-Fetch-Site cross-site, no Origin (a form GET)", "/engage?verbose=1", hdr(iSecS+":", "Sec-Fetch-Site", "cross-site"), set("x3"), "", browserMsg, ""},
		{"Sec-Fetch-Site same-site", "/engage?verbose=1", hdr(iSecS+":", "Sec-Fetch-Site", "same-site", "Origin", "https://www.example"), set("x4"), "", browserMsg, ""},
		{"Origin null", "/engage?verbose=1", hdr(iSecS+":", "Origin", "null"), set("x5"), "", browserMsg, ""},
		{"groups from another origin", "/groups?verbose=1", hdr(iSecS+":", "Origin", evil),
			"data=" + url.QueryEscape(`{"$group_key":"company","$group_id":"evil","$set":{"a":1}}`), "", browserMsg, ""},
		{"server-side SDK, no Origin", "/engage?verbose=1", hdr(iSecS + ":"), set("ok1"), `{"status":1,"error":null}`, "", "ok1"},
		{"owner credentials, no Origin", "/engage?verbose=1&project_id=1", hdr(owner), set("ok2"), `{"status":1,"error":null}`, "", "ok2"},
		{"this server's own origin", "/engage?verbose=1", hdr(iSecS+":", "Origin", e.url, "Sec-Fetch-Site", "same-origin"), set("ok3"), `{"status":1,"error":null}`, "", "ok3"},
		{"browser SDK: $token from another origin", "/engage?verbose=1", hdr(iSecS+":", "Origin", evil),
			"data=" + url.QueryEscape(`{"$token":"`+iTokS+`","$distinct_id":"ok4","$set":{"a":1}}`), `{"status":1,"error":null}`, "", "ok4"},
	}
	for _, tc := range profiles {
		r := e.do("POST", tc.target, tc.hdr, tc.body)
		if r.Status != http.StatusOK || tc.answer != "" && strings.TrimSpace(string(r.Body)) != tc.answer ||
			tc.contains != "" && (!strings.Contains(string(r.Body), tc.contains) || fmt.Sprint(r.json(t)["status"]) != "0") {
			t.Errorf("%s: %s", tc.name, r)
		}
		if v := r.Header.Get("WWW-Authenticate"); v != "" {
			t.Errorf("%s: a token endpoint challenged for credentials: %q", tc.name, v)
		}
	}
	for _, id := range []string{"x1", "x2", "x3", "x4", "x5"} {
		if p := e.profile(iSecS, id); p != nil {
			t.Errorf("profile %s stored from a cross-site request: %v", id, p)
		}
	}
	for _, id := range []string{"ok1", "ok2", "ok3", "ok4"} {
		if e.profile(iSecS, id) == nil {
			t.Errorf("profile %s not stored", id)
		}
	}

	const importRefusal = "/import does not take requests a browser sends from another site"
	ev := func(name string) string { return url.QueryEscape(b64JSON(trackEvent(name, iTokS, "u-"+name))) }
	merge := url.QueryEscape(`{"event":"$merge","properties":{"$distinct_ids":["u-a","u-b"]}}`)
	imports := []struct {
		name, method, target string
		hdr                  map[string]string
		body                 string
		status               int
	}{
		{"<img src=/import?data=>: Sec-Fetch-Site cross-site", "GET", "/import?data=" + ev("c1"), hdr(iSecS+":", "Sec-Fetch-Site", "cross-site"), "", 403},
		{"GET with another Origin", "GET", "/import?data=" + ev("c2"), hdr(owner, "Origin", evil), "", 403},
		{"GET same-site", "GET", "/import/?data=" + ev("c3"), hdr(iSecS+":", "Sec-Fetch-Site", "same-site"), "", 403},
		{"token-less $merge by GET", "GET", "/import?data=" + merge, hdr(iSecS+":", "Sec-Fetch-Site", "cross-site"), "", 403},
		{"form POST from another site", "POST", "/import", hdr(iSecS+":", "Origin", evil), "data=" + ev("c4"), 403},
		{"Node SDK import(): no Origin", "GET", "/import?data=" + ev("n1"), hdr(iSecS + ":"), "", 200},
		{"typed into the address bar", "GET", "/import?data=" + ev("n2"), hdr(iSecS+":", "Sec-Fetch-Site", "none"), "", 200},
	}
	for _, tc := range imports {
		r := e.do(tc.method, tc.target, tc.hdr, tc.body)
		if r.Status != tc.status || tc.status == 403 && !strings.Contains(string(r.Body), importRefusal) {
			t.Errorf("%s: %s, want %d", tc.name, r, tc.status)
		}
	}
	got := e.exportNames(iSecS)
	for _, name := range []string{"c1", "c2", "c3", "c4"} {
		if len(got[name]) != 0 {
			t.Errorf("event %s stored from a cross-site request", name)
		}
	}
	for _, name := range []string{"n1", "n2"} {
		if len(got[name]) != 1 {
			t.Errorf("event %s stored %d times, want 1", name, len(got[name]))
		}
	}
}

// TestCrossSiteWritesRefused: every credentialed write (here a lookup
// table upload; the app API's writes in scheduler/appapi) refuses a request a
// browser sent for another site's page, whose Basic credentials the
// browser re-sends on its own; reads and server-side clients are
// unaffected, and nothing is written.
func TestCrossSiteWritesRefused(t *testing.T) {
	e := newIngestEnv(t)
	owner := iOwner + ":" + iOwnerS
	cases := []struct {
		name, method, target string
		hdr                  map[string]string
		body                 string
		status               int
	}{
		{"lookup PUT from another origin", "PUT", "/lookup-tables/no-such-table?project_id=1",
			map[string]string{"basic": owner, "Content-Type": "text/csv", "Origin": "https://evil.example"}, "k,v\n1,2\n", 403},
		{"lookup PUT, Sec-Fetch-Site cross-site", "PUT", "/lookup-tables/no-such-table?project_id=1",
			map[string]string{"basic": owner, "Content-Type": "text/csv", "Sec-Fetch-Site": "cross-site"}, "k,v\n1,2\n", 403},
		{"lookup PUT from a server: reaches the handler", "PUT", "/lookup-tables/no-such-table?project_id=1",
			map[string]string{"basic": owner, "Content-Type": "text/csv"}, "k,v\n1,2\n", 404},
		{"export read from another origin: not a write", "GET", "/api/2.0/export?project_id=1&from_date=2026-01-01&to_date=2026-01-01",
			map[string]string{"basic": owner, "Origin": "https://evil.example"}, "", 200},
	}
	for _, tc := range cases {
		r := e.do(tc.method, tc.target, tc.hdr, tc.body)
		if r.Status != tc.status || tc.status == 403 && !strings.Contains(string(r.Body), "not taken from a browser on another site") {
			t.Errorf("%s: %s, want %d", tc.name, r, tc.status)
		}
	}
}
