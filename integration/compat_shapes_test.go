package integration

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// The requests of the official clients, byte for byte as their sources
// build them (mixpanel-browser 2.83.0 src/mixpanel-core.js _send_request
// and request-batcher.js; mixpanel 0.24.0 lib/mixpanel-node.js
// send_request; mixpanel-go 1.2.1 identity.go and ingestion.go;
// mixpanel-import 3.1.43 components/importers.js), sent raw to a real
// server and read back through export and engage. The suite that drives
// the packages themselves builds on these shapes.

const shopOrigin = "https://shop.example"

// uuid4 is a random UUIDv4, as mixpanel-browser's _.UUID (crypto.randomUUID).
func uuid4(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// browserEvent is an event as mixpanel-browser queues it: time in
// fractional seconds, its own $insert_id, the device's ids as super
// properties ($user_id once identify() has run).
func browserEvent(name, token, distinctID, device, user string) map[string]any {
	p := map[string]any{
		"token": token, "distinct_id": distinctID, "$device_id": device,
		"time": float64(time.Now().Add(-time.Minute).UnixMilli()) / 1000, "$insert_id": uid("b"),
		"mp_lib": "web", "$lib_version": "2.83.0", "$current_url": shopOrigin + "/cart",
	}
	if user != "" {
		p["$user_id"] = user
	}
	return map[string]any{"event": name, "properties": p}
}

// browserSend is mixpanel-browser's _send_request with its defaults:
// POST <api_host>/<route>/?[verbose=1&]ip=1&_=<ms>, form body
// data=<base64 JSON> (JSON when api_payload_format is "json"), the page's
// Origin, withCredentials; sendBeacon posts the same body as text/plain.
func (s *server) browserSend(t *testing.T, route string, payload any, opt browserOpt) reply {
	t.Helper()
	data := string(mustJSON(t, payload))
	if !opt.jsonPayload {
		data = b64([]byte(data))
	}
	q := url.Values{"ip": {"1"}, "_": {fmt.Sprint(time.Now().UnixMilli())}}
	if opt.verbose {
		q.Set("verbose", "1")
	}
	ct := "application/x-www-form-urlencoded"
	if opt.beacon {
		ct = "text/plain;charset=UTF-8"
	}
	return s.do(t, request{Path: "/" + route + "/", Query: q, Body: []byte("data=" + url.QueryEscape(data)),
		Header: map[string]string{"Content-Type": ct, "Origin": shopOrigin}})
}

type browserOpt struct{ verbose, jsonPayload, beacon bool }

// wantBrowserOK checks an answer the browser may read: 200, CORS for a
// credentialed request, and the body the SDK decodes.
func wantBrowserOK(t *testing.T, what string, r reply, body string) {
	t.Helper()
	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != body {
		t.Errorf("%s: %s, want 200 %s", what, r, body)
	}
	if r.Header.Get("Access-Control-Allow-Origin") != shopOrigin || r.Header.Get("Access-Control-Allow-Credentials") != "true" ||
		!slices.Contains(r.Header.Values("Vary"), "Origin") {
		t.Errorf("%s: CORS headers %v", what, r.Header)
	}
}

// distinctIDsByEvent is the raw export of a project: event → distinct_ids.
func distinctIDsByEvent(t *testing.T, s *server, secret string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, e := range s.export(t, basicAuth(secret, ""), 0, nil) {
		id, _ := e.Properties["distinct_id"].(string)
		out[e.Event] = append(out[e.Event], id)
	}
	return out
}

// TestCompatBrowserSimplified: mixpanel-browser's default configuration
// (batching on, base64 payloads, routes ending in a slash) on a Simplified
// ID Merge project: anonymous events, identify(), people.set, a group,
// and the sendBeacon flush on page hide.
func TestCompatBrowserSimplified(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	dev := uuid4(t)
	anon, user := "$device:"+dev, "browser-user-1"
	batch := browserOpt{verbose: true}
	wantBrowserOK(t, "anonymous batch", s.browserSend(t, "track",
		[]any{browserEvent("Viewed Cart", mainToken, anon, dev, "")}, batch), `{"status":1,"error":null}`)
	// identify(): $identify plus the events after it carry $user_id.
	wantBrowserOK(t, "identify batch, JSON payload", s.browserSend(t, "track", []any{
		map[string]any{"event": "$identify", "properties": map[string]any{"token": mainToken, "distinct_id": user,
			"$anon_distinct_id": anon, "$user_id": user, "$device_id": dev, "time": float64(time.Now().UnixMilli()) / 1000, "$insert_id": uid("i")}},
		browserEvent("Checked Out", mainToken, user, dev, user),
	}, browserOpt{verbose: true, jsonPayload: true}), `{"status":1,"error":null}`)
	wantBrowserOK(t, "people.set", s.browserSend(t, "engage", []any{map[string]any{
		"$set": map[string]any{"plan": "pro"}, "$token": mainToken, "$distinct_id": user, "$device_id": dev, "$user_id": user,
	}}, batch), `{"status":1,"error":null}`)
	wantBrowserOK(t, "people.union, unbatched", s.browserSend(t, "engage", map[string]any{
		"$union": map[string]any{"tags": []string{"a"}}, "$token": mainToken, "$distinct_id": user,
	}, browserOpt{}), "1")
	wantBrowserOK(t, "group set", s.browserSend(t, "groups", []any{map[string]any{
		"$set": map[string]any{"name": "Acme"}, "$token": mainToken, "$group_key": "company", "$group_id": "acme",
	}}, batch), `{"status":1,"error":null}`)
	// The page is hidden: the queue goes out by sendBeacon, as text/plain.
	r := s.browserSend(t, "track", []any{browserEvent("Left Page", mainToken, user, dev, user)}, browserOpt{verbose: true, beacon: true})
	if r.Status != http.StatusOK {
		t.Errorf("sendBeacon: %s", r)
	}

	got := distinctIDsByEvent(t, s, mainSecret)
	for _, name := range []string{"Viewed Cart", "$identify", "Checked Out", "Left Page"} {
		if !slices.Equal(got[name], []string{user}) {
			t.Errorf("export: %q under %v, want [%s] (the device is linked to the user)", name, got[name], user)
		}
	}
	p := engageProfiles(t, s, mainSecret, url.Values{"distinct_id": {user}})[user]
	if p["plan"] != "pro" || fmt.Sprint(p["tags"]) != "[a]" {
		t.Errorf("profile %v", p)
	}
	if g := engageProfiles(t, s, mainSecret, url.Values{"data_group_id": {"company"}})["acme"]; g["name"] != "Acme" {
		t.Errorf("group profile %v", g)
	}
}

// TestCompatBrowserOriginalIDMerge: identify() and alias() on an Original
// ID Merge project. identify() sends $anon_distinct_id = "$device:<uuid>"
// and no $identified_id; the pre-login events must end up under the user.
func TestCompatBrowserOriginalIDMerge(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	dev := uuid4(t)
	anon, user := "$device:"+dev, "browser-user-2"
	one := browserOpt{}
	wantBrowserOK(t, "anonymous event", s.browserSend(t, "track", browserEvent("Viewed Cart", otherToken, anon, dev, ""), one), "1")
	wantBrowserOK(t, "identify", s.browserSend(t, "track", map[string]any{"event": "$identify", "properties": map[string]any{
		"token": otherToken, "distinct_id": user, "$anon_distinct_id": anon, "$user_id": user, "$device_id": dev,
		"time": float64(time.Now().UnixMilli()) / 1000}}, one), "1")
	// alias(new): $create_alias of the current distinct_id, then events under the alias.
	const alias = "user2@shop.example"
	wantBrowserOK(t, "alias", s.browserSend(t, "track", map[string]any{"event": "$create_alias", "properties": map[string]any{
		"token": otherToken, "distinct_id": user, "alias": alias, "time": float64(time.Now().UnixMilli()) / 1000}}, one), "1")
	wantBrowserOK(t, "event under the alias", s.browserSend(t, "track", browserEvent("Paid", otherToken, alias, dev, alias), one), "1")

	got := distinctIDsByEvent(t, s, otherSecret)
	for _, name := range []string{"Viewed Cart", "$identify", "$create_alias", "Paid"} {
		if !slices.Equal(got[name], []string{user}) {
			t.Errorf("export: %q under %v, want [%s]", name, got[name], user)
		}
	}
}

// TestCompatNodeSDK: mixpanel-node sends single calls as GET ?data=<base64>
// (its import() too), batches as form POSTs, and with a secret configured
// sends it to every endpoint; it wants exactly "1", or status 1 when verbose.
func TestCompatNodeSDK(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	get := func(path string, data any, verbose string, auth authFn, extra url.Values) reply {
		q := url.Values{"ip": {"0"}, "verbose": {verbose}, "data": {b64(mustJSON(t, data))}}
		for k, v := range extra {
			q[k] = v
		}
		return s.do(t, request{Method: http.MethodGet, Path: path, Query: q, Auth: auth})
	}
	nodeEvent := func(name string, ms bool) map[string]any {
		at := time.Now().Add(-2 * time.Hour)
		tm := any(at.Unix())
		if ms { // import() sends a Date as getTime()
			tm = at.UnixMilli()
		}
		return map[string]any{"event": name, "properties": map[string]any{"distinct_id": "node-user", "time": tm,
			"$insert_id": uid("n"), "token": mainToken, "mp_lib": "node", "$lib_version": "0.24.0"}}
	}
	for _, c := range []struct {
		name string
		r    reply
		want string
	}{
		{"track", get("/track", nodeEvent("node track", false), "0", asSecret, nil), "1"},
		{"track verbose", get("/track", nodeEvent("node track verbose", false), "1", asSecret, nil), `{"status":1,"error":null}`},
		{"import() with the secret", get("/import", nodeEvent("node import", true), "0", asSecret, nil), "1"},
		{"import() with a service account", get("/import", nodeEvent("node import sa", true), "0", asOwner, projectQ(mainID)), "1"},
		{"import_batch", s.do(t, request{Path: "/import", Query: url.Values{"ip": {"0"}, "verbose": {"0"}}, Auth: asSecret,
			Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			Body:   []byte("data=" + b64(mustJSON(t, []any{nodeEvent("node batch", true), nodeEvent("node batch", true)})))}), "1"},
		{"people.set", get("/engage", map[string]any{"$set": map[string]any{"plan": "team"}, "$token": mainToken, "$distinct_id": "node-user"}, "0", asSecret, nil), "1"},
		{"groups.set", get("/groups", map[string]any{"$set": map[string]any{"seats": 3}, "$token": mainToken, "$group_key": "company", "$group_id": "node-co"}, "0", asSecret, nil), "1"},
	} {
		if c.r.Status != http.StatusOK || string(c.r.Body) != c.want && strings.TrimSpace(string(c.r.Body)) != c.want {
			t.Errorf("%s: %s, want 200 %s", c.name, c.r, c.want)
		}
	}
	got := distinctIDsByEvent(t, s, mainSecret)
	for name, n := range map[string]int{"node track": 1, "node track verbose": 1, "node import": 1, "node import sa": 1, "node batch": 2} {
		if len(got[name]) != n {
			t.Errorf("export: %d %q events, want %d", len(got[name]), name, n)
		}
	}
	if p := engageProfiles(t, s, mainSecret, url.Values{"distinct_id": {"node-user"}})["node-user"]; p["plan"] != "team" {
		t.Errorf("profile %v", p)
	}
	if g := engageProfiles(t, s, mainSecret, url.Values{"data_group_id": {"company"}})["node-co"]; fmt.Sprint(g["seats"]) != "3" {
		t.Errorf("group %v", g)
	}
}

// TestCompatGoMergeAndImport: mixpanel-go's Merge posts a token-less
// $merge as form data= with the API secret and wants a bare 1; its Import
// with Strict:false sends strict=0 and decodes num_records_imported.
func TestCompatGoMergeAndImport(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	other := basicAuth(otherSecret, "")
	for _, id := range []string{"go-a", "go-b"} {
		wantImported(t, s.importEvents(t, other, nil, []any{event("go "+id, id, uid("g"), time.Now().Add(-time.Hour), nil)}), 1)
	}
	merge := func(a authFn) reply {
		return s.do(t, request{Path: "/import", Auth: a, Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/plain"},
			Body: []byte("data=" + url.QueryEscape(`{"event":"$merge","properties":{"$distinct_ids":["go-a","go-b"]}}`))})
	}
	if r := merge(other); r.Status != http.StatusOK || string(r.Body) != "1" {
		t.Fatalf("Merge on an Original project: %s", r)
	}
	got := distinctIDsByEvent(t, s, otherSecret)
	if len(got["go go-a"]) != 1 || len(got["go go-b"]) != 1 || got["go go-a"][0] != got["go go-b"][0] {
		t.Errorf("after Merge: %v, want both events under one id", got)
	}
	if r := merge(asSecret); r.Status != http.StatusOK || string(r.Body) != "1" {
		t.Errorf("Merge on a Simplified project (accepted, changes nothing): %s", r)
	}

	evs := events("go lenient", 3)
	r := s.do(t, request{Path: "/import", Auth: asSecret, Query: url.Values{"strict": {"0"}, "verbose": {"1"}},
		Header: map[string]string{"Accept": "application/json"}, Body: mustJSON(t, evs)})
	wantImported(t, r, 3)
}

// TestCompatMixpanelImportProfiles: mixpanel-import posts profile and
// group updates as a JSON array without $token, authenticated by a
// service account (with project_id) or the secret, and reads JSON.
func TestCompatMixpanelImportProfiles(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	q := url.Values{"ip": {"0"}, "verbose": {"1"}, "strict": {"1"}}
	hdr := map[string]string{"Accept": "application/json"}
	users := []any{
		map[string]any{"$distinct_id": "imp-1", "$ip": 0, "$ignore_time": true, "$set": map[string]any{"plan": "free"}},
		map[string]any{"$distinct_id": "imp-2", "$ip": 0, "$ignore_time": true, "$set": map[string]any{"plan": "pro"}},
	}
	withProject := url.Values{"project_id": {fmt.Sprint(mainID)}}
	for k, v := range q {
		withProject[k] = v
	}
	r := s.do(t, request{Path: "/engage", Query: withProject, Auth: asOwner, Header: hdr, Body: mustJSON(t, users)})
	if m := r.JSON(t); r.Status != http.StatusOK || m["status"] != jsonNum(1) || m["error"] != nil {
		t.Errorf("users with a service account: %s", r)
	}
	groups := []any{map[string]any{"$group_key": "company", "$group_id": "imp-co", "$set": map[string]any{"tier": "gold"}}}
	r = s.do(t, request{Path: "/groups", Query: q, Auth: asSecret, Header: hdr, Body: mustJSON(t, groups)})
	if m := r.JSON(t); r.Status != http.StatusOK || m["status"] != jsonNum(1) {
		t.Errorf("groups with the secret: %s", r)
	}
	// Without credentials an update without $token has no project.
	r = s.do(t, request{Path: "/engage", Query: q, Header: hdr, Body: mustJSON(t, users[:1])})
	if m := r.JSON(t); r.Status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(m["failed_records"]), "authenticate the request") {
		t.Errorf("no credentials, strict=1: %s", r)
	}
	ps := engageProfiles(t, s, mainSecret, url.Values{"distinct_ids": {`["imp-1","imp-2"]`}})
	if ps["imp-1"]["plan"] != "free" || ps["imp-2"]["plan"] != "pro" {
		t.Errorf("profiles %v", ps)
	}
	if g := engageProfiles(t, s, mainSecret, url.Values{"data_group_id": {"company"}})["imp-co"]; g["tier"] != "gold" {
		t.Errorf("group %v", g)
	}
}

// TestCompatRefusalsNameTheRule: a refused record says which rule it broke.
func TestCompatRefusalsNameTheRule(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	ahead := event("late", "u", uid("l"), time.Now().Add(2*time.Hour), nil)
	old := event("old", "u", uid("o"), time.Unix(86400, 0), nil)
	r := s.importEvents(t, asSecret, nil, []any{ahead, old})
	var body struct {
		Failed []struct {
			Index   int    `json:"index"`
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"failed_records"`
	}
	if r.Status != http.StatusBadRequest || json.Unmarshal(r.Body, &body) != nil || len(body.Failed) != 2 {
		t.Fatalf("import: %s", r)
	}
	for i, want := range []string{"'properties.time' is invalid: more than 1 hour in the future by the server clock (",
		"'properties.time' is invalid: before 1971-01-01"} {
		if f := body.Failed[i]; f.Field != "properties.time" || !strings.HasPrefix(f.Message, want) {
			t.Errorf("failed_records[%d] = %+v, want a message starting %q", i, f, want)
		}
	}
	ahead["properties"].(map[string]any)["token"] = mainToken
	r = s.track(t, "POST", url.Values{"verbose": {"1"}}, "application/json", mustJSON(t, []any{ahead}), nil)
	if msg := wantVerbose(t, r, 0); !strings.Contains(msg, "more than 1 hour in the future") {
		t.Errorf("/track: %q", msg)
	}
}

// TestCompatCORS: browsers get what they need from the token endpoints,
// nothing from the others; a project with cors_allowed_origins takes
// browser data from those origins only.
func TestCompatCORS(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Projects[2].CORSOrigins = []string{shopOrigin} // otherID
	s := startServer(t, cfg)
	for _, path := range []string{"/track/", "/engage/", "/groups/", "/track"} {
		r := s.do(t, request{Method: http.MethodOptions, Path: path, Header: map[string]string{"Origin": "https://blog.example",
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,content-encoding"}})
		if r.Status != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "https://blog.example" ||
			r.Header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "Content-Type") ||
			r.Header.Get("Access-Control-Max-Age") == "" {
			t.Errorf("preflight %s: %d %v", path, r.Status, r.Header)
		}
	}
	for _, rq := range []request{
		{Method: http.MethodOptions, Path: "/import"},
		{Path: "/import", Auth: asSecret, Body: mustJSON(t, events("cors", 1))},
		{Method: http.MethodGet, Path: "/api/2.0/export", Auth: asSecret, Query: exportQuery(0, nil)},
		{Method: http.MethodGet, Path: "/api/2.0/engage", Auth: asSecret},
		{Method: http.MethodGet, Path: "/lookup-tables", Auth: asSecret},
		{Path: "/oauth/token", Body: []byte("grant_type=client_credentials")},
	} {
		rq.Header = map[string]string{"Origin": shopOrigin}
		r := s.do(t, rq)
		for k := range r.Header {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s %s answered %s", rq.Method, rq.Path, k)
			}
		}
	}
	// The restricted project: its origin is served, another is refused.
	from := func(origin, name string) reply {
		return s.do(t, request{Path: "/track/", Query: url.Values{"verbose": {"1"}, "ip": {"1"}},
			Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": origin},
			Body:   []byte("data=" + url.QueryEscape(b64(mustJSON(t, []any{trackEvent(name, otherToken, time.Now())}))))})
	}
	wantBrowserOK(t, "listed origin", from(shopOrigin, "from shop"), `{"status":1,"error":null}`)
	r := from("https://blog.example", "from blog")
	if msg := wantVerbose(t, r, 0); !strings.Contains(msg, "cors_allowed_origins") || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("unlisted origin: %s %v", r, r.Header)
	}
	got := distinctIDsByEvent(t, s, otherSecret)
	if len(got["from shop"]) != 1 || len(got["from blog"]) != 0 {
		t.Errorf("stored %v", got)
	}
}
