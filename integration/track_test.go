package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mixpanel/mixpanel-go"
)

// /track: token-in-payload ingestion as the official SDKs and the browser
// send it. Every stored event is read back through the raw export.

// trackEvent is a /track record for project token tok.
func trackEvent(name, tok string, at time.Time) map[string]any {
	return event(name, "track-user", uid("t"), at, map[string]any{"token": tok})
}

// track sends one /track request and returns the reply.
func (s *server) track(t *testing.T, method string, q url.Values, ct string, body []byte, hdr map[string]string) reply {
	t.Helper()
	h := map[string]string{}
	if ct != "" {
		h["Content-Type"] = ct
	}
	for k, v := range hdr {
		h[k] = v
	}
	return s.do(t, request{Method: method, Path: "/track", Query: q, Header: h, Body: body})
}

func wantBody(t *testing.T, r reply, want string) {
	t.Helper()
	if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != want {
		t.Fatalf("want 200 %s, got %s", want, r)
	}
}

// wantVerbose checks a {"status":N,"error":…} answer and returns the error.
func wantVerbose(t *testing.T, r reply, status int) string {
	t.Helper()
	var b struct {
		Status *int    `json:"status"`
		Error  *string `json:"error"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &b) != nil || b.Status == nil || *b.Status != status {
		t.Fatalf("want 200 {\"status\":%d,…}, got %s", status, r)
	}
	if status == 0 && (b.Error == nil || *b.Error == "") {
		t.Fatalf("status 0 without an error message: %s", r)
	}
	if b.Error == nil {
		return ""
	}
	return *b.Error
}

func TestTrackSDK(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	start := time.Now()
	// The SDK's Track posts a raw JSON array to /track?verbose=1 with no
	// credentials: NewEvent puts the client's token in properties.token.
	c := sdkClient(s, mixpanel.ApiSecret(mainSecret))
	sent := sdkEvents(c, "sdk track", 30, time.Now().Add(-2*time.Hour))
	if err := c.Track(context.Background(), sent); err != nil {
		t.Fatalf("Track: %v", err)
	}
	from, to := exportRange()
	got, err := c.Export(context.Background(), from, to, mixpanel.ExportNoLimit, `["sdk track"]`, mixpanel.ExportNoWhereFilter)
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	compareExport(t, sent, got, start)

	// A client with an unknown token gets status 0, which Track reports.
	bad := mixpanel.NewApiClient("no-such-token", mixpanel.ProxyApiLocation(s.URL), mixpanel.HttpClient(httpClient))
	if err := bad.Track(context.Background(), sdkEvents(bad, "sdk bad", 2, time.Now())); err == nil {
		t.Fatal("Track with an unknown token succeeded")
	}
}

func TestTrackEncodings(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	at := time.Now().Add(-time.Hour)
	var want []string
	send := func(name string, r func(evs []map[string]any) reply, n int) {
		evs := make([]map[string]any, n)
		for i := range evs {
			evs[i] = trackEvent(name, mainToken, at.Add(time.Duration(i)*time.Second))
			want = append(want, evs[i]["properties"].(map[string]any)["$insert_id"].(string))
		}
		if rep := r(evs); rep.Status != http.StatusOK || strings.TrimSpace(string(rep.Body)) != "1" {
			t.Fatalf("%s: want 200 1, got %s", name, rep)
		}
	}
	form := "application/x-www-form-urlencoded"
	send("form base64", func(evs []map[string]any) reply {
		return s.track(t, "POST", nil, form, []byte(url.Values{"data": {b64(mustJSON(t, evs))}}.Encode()), nil)
	}, 3)
	send("form raw JSON", func(evs []map[string]any) reply { // mixpanel-python: verbose and ip in the form
		r := s.track(t, "POST", nil, form, []byte(url.Values{"data": {string(mustJSON(t, evs))}, "verbose": {"1"}, "ip": {"0"}}.Encode()), nil)
		if msg := wantVerbose(t, r, 1); msg != "" {
			t.Errorf("all-valid batch answered with an error: %s", r)
		}
		return reply{Status: 200, Body: []byte("1")}
	}, 2)
	send("form single object", func(evs []map[string]any) reply {
		return s.track(t, "POST", nil, form, []byte(url.Values{"data": {b64(mustJSON(t, evs[0]))}}.Encode()), nil)
	}, 1)
	send("GET base64", func(evs []map[string]any) reply { // mixpanel-node single events
		return s.track(t, "GET", url.Values{"data": {b64(mustJSON(t, evs[0]))}, "ip": {"0"}}, "", nil, nil)
	}, 1)
	send("GET raw JSON", func(evs []map[string]any) reply {
		return s.track(t, "GET", url.Values{"data": {string(mustJSON(t, evs))}}, "", nil, nil)
	}, 2)
	send("JSON array", func(evs []map[string]any) reply {
		return s.track(t, "POST", nil, "application/json", mustJSON(t, evs), nil)
	}, 4)
	send("JSON object gzip", func(evs []map[string]any) reply {
		return s.track(t, "POST", nil, "application/json", gzipped(t, mustJSON(t, evs[0])), map[string]string{"Content-Encoding": "gzip"})
	}, 1)

	got := s.export(t, asSecret, 0, nil)
	if !sameStrings(sortedCopy(exportedIDs(got)), sortedCopy(want)) {
		t.Fatalf("export has %v, want %v", exportedIDs(got), want)
	}
	for _, e := range got {
		if e.Properties["distinct_id"] != "track-user" || e.Properties["token"] != mainToken {
			t.Errorf("event %s: distinct_id %v token %v", e.InsertID(), e.Properties["distinct_id"], e.Properties["token"])
		}
	}
}

func TestTrackAnswersAndRefusals(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	at := time.Now().Add(-time.Minute)
	post := func(q url.Values, evs ...map[string]any) reply {
		return s.track(t, "POST", q, "application/json", mustJSON(t, evs), nil)
	}
	verbose := url.Values{"verbose": {"1"}}

	// Unknown, missing and empty tokens fail the record: 0, nothing stored.
	wantBody(t, post(nil, trackEvent("E", "nope", at)), "0")
	noTok := event("E", "u", uid("t"), at, nil)
	if msg := wantVerbose(t, post(verbose, noTok), 0); !strings.Contains(msg, "properties.token") {
		t.Errorf("missing token message %q", msg)
	}
	// Mixed: the good record is stored and the answer is 1 (one or more
	// valid), with an error naming what failed.
	good := trackEvent("good", mainToken, at)
	if msg := wantVerbose(t, post(verbose, trackEvent("E", "nope", at), good), 1); !strings.Contains(msg, "1 of 2 records failed validation") {
		t.Errorf("mixed batch message %q", msg)
	}
	// Two projects in one request each get their own events.
	other := trackEvent("other", otherToken, at)
	wantBody(t, post(nil, other, trackEvent("good2", mainToken, at)), "1")

	// $merge needs a secret, service account or OAuth on /import.
	merge := map[string]any{"event": "$merge", "properties": map[string]any{"$distinct_ids": []string{"a", "b"}, "token": mainToken}}
	if msg := wantVerbose(t, post(verbose, merge), 0); !strings.Contains(msg, "$merge") {
		t.Errorf("$merge message %q", msg)
	}
	// Malformed bodies and a missing data= are the legacy 0, not a 400.
	wantVerbose(t, s.track(t, "POST", verbose, "application/json", []byte("[{"), nil), 0)
	wantBody(t, s.track(t, "GET", nil, "", nil, nil), "0")
	wantBody(t, s.track(t, "POST", nil, "application/x-www-form-urlencoded", []byte("data=%%%"), nil), "0")

	// A project enrolled in another region: 403 naming the host, nothing stored.
	r := post(nil, trackEvent("eu", euToken, at))
	if r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "api-eu") {
		t.Fatalf("EU token on a US server: %s", r)
	}
	if r := s.track(t, "PUT", nil, "", nil, nil); r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /track: %s", r)
	}

	names := func(a authFn) []string {
		var out []string
		for _, e := range s.export(t, a, 0, nil) {
			out = append(out, e.Event)
		}
		return sortedCopy(out)
	}
	if got := names(asSecret); !sameStrings(got, []string{"good", "good2"}) {
		t.Errorf("main project has %v, want [good good2]", got)
	}
	if got := names(basicAuth(otherSecret, "")); !sameStrings(got, []string{"other"}) {
		t.Errorf("other project has %v, want [other]", got)
	}
}

func TestTrackRateLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	evs := make([]map[string]any, 20) // well over the tiny project's 2 KiB a minute
	for i := range evs {
		evs[i] = trackEvent("E", tinyToken, time.Now().Add(-time.Minute))
	}
	r := s.track(t, "POST", nil, "application/json", mustJSON(t, evs), nil)
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("want 429, got %s", r)
	}
}

func TestTrackOldEventsDropped(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	old := time.Now().Add(-6 * 24 * time.Hour)
	// All too old: still 1 (the public docs: silently dropped, answer 1),
	// nothing stored, and the drop is counted.
	wantVerbose(t, s.track(t, "POST", url.Values{"verbose": {"1"}}, "application/json",
		mustJSON(t, []any{trackEvent("old", mainToken, old), trackEvent("old", mainToken, old)}), nil), 1)
	recent := trackEvent("recent", mainToken, time.Now().Add(-4*24*time.Hour))
	wantBody(t, s.track(t, "POST", nil, "application/json", mustJSON(t, []any{trackEvent("old", mainToken, old), recent}), nil), "1")

	got := s.export(t, asSecret, 0, url.Values{"from_date": {time.Now().UTC().AddDate(0, 0, -10).Format(time.DateOnly)}})
	if len(got) != 1 || got[0].Event != "recent" {
		t.Fatalf("export: %v, want only the 4-day-old event", got)
	}
	m := s.do(t, request{Method: "GET", Path: "/metrics", Auth: asSecret})
	if !strings.Contains(string(m.Body), `tributary_track_events_too_old_total{project="1"} 3`) {
		t.Errorf("metrics lack the too-old counter of 3:\n%s", m.Body)
	}
}

func TestTrackIPDistinctID(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	anon := map[string]any{"event": "anon", "properties": map[string]any{"token": mainToken, "$insert_id": uid("ip")}}
	wantBody(t, s.track(t, "GET", url.Values{"data": {b64(mustJSON(t, anon))}, "ip": {"1"}}, "", nil, nil), "1")
	named := trackEvent("named", mainToken, time.Now())
	wantBody(t, s.track(t, "POST", url.Values{"ip": {"1"}}, "application/json", mustJSON(t, named), nil), "1")
	got := s.export(t, asSecret, 0, nil)
	if len(got) != 2 {
		t.Fatalf("export has %d events, want 2", len(got))
	}
	for _, e := range got {
		want := map[string]string{"anon": "127.0.0.1", "named": "track-user"}[e.Event]
		if e.Properties["distinct_id"] != want {
			t.Errorf("%s: distinct_id %v, want %q", e.Event, e.Properties["distinct_id"], want)
		}
	}
}

func TestTrackCORS(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	origin := "https://shop.example.com"
	for _, path := range []string{"/track", "/engage", "/groups"} {
		r := s.do(t, request{Method: http.MethodOptions, Path: path, Header: map[string]string{
			"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}})
		if r.Status != http.StatusOK {
			t.Fatalf("OPTIONS %s: %s", path, r)
		}
		for k, want := range map[string]string{
			"Access-Control-Allow-Origin":  origin,
			"Access-Control-Allow-Methods": "GET, POST, OPTIONS",
		} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("OPTIONS %s: %s = %q, want %q", path, k, got, want)
			}
		}
		if h := r.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(h, "Content-Type") {
			t.Errorf("OPTIONS %s: Allow-Headers %q lacks Content-Type", path, h)
		}
	}
	// Actual responses carry the header too; without an Origin it is *.
	r := s.track(t, "POST", nil, "application/json", mustJSON(t, trackEvent("E", mainToken, time.Now())), map[string]string{"Origin": origin})
	if r.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("POST /track: Allow-Origin %q", r.Header.Get("Access-Control-Allow-Origin"))
	}
	r = s.track(t, "GET", url.Values{"data": {"[]"}}, "", nil, nil)
	if r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET /track without Origin: Allow-Origin %q", r.Header.Get("Access-Control-Allow-Origin"))
	}
	// A browser SDK reads the answers of /engage too.
	upd := []byte(`[{"$token":"` + mainToken + `","$distinct_id":"cors-user","$set":{"a":1}}]`)
	r = s.do(t, request{Path: "/engage", Body: upd, Header: map[string]string{"Origin": origin}})
	if r.Status != http.StatusOK || string(r.Body) != "1" || r.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Fatalf("POST /engage: %s, Allow-Origin %q", r, r.Header.Get("Access-Control-Allow-Origin"))
	}
	// /import stays same-origin only: it takes secrets.
	r = s.do(t, request{Method: http.MethodOptions, Path: "/import", Header: map[string]string{"Origin": origin}})
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("OPTIONS /import answered CORS")
	}
}
