package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The request shapes of the official clients (mixpanel-browser 2.83,
// mixpanel-node 0.24, mixpanel-go 1.2, mixpanel-import 3.1), read from
// their sources; integration/compat_shapes_test.go sends the same through
// the real binary.

const formCT = "application/x-www-form-urlencoded"

// futureMessage is the refusal of a time two hours ahead (sent in whole
// seconds, so a little less).
var futureMessage = regexp.MustCompile(`^'properties\.time' is invalid: more than 1 hour in the future by the server clock \((1h59m5\ds|2h0m0s) ahead\)$`)

func b64JSON(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }

func trackEvent(name, token, distinctID string) string {
	return fmt.Sprintf(`{"event":%q,"properties":{"token":%q,"distinct_id":%q,"time":%d,"$insert_id":%q}}`,
		name, token, distinctID, time.Now().Unix()-60, strings.ReplaceAll(name, " ", "-"))
}

func TestTrackRequestShapes(t *testing.T) {
	e := newIngestEnv(t)
	ev := func(name string) string { return trackEvent(name, iTokS, "u-"+name) }
	cb := fmt.Sprint(time.Now().UnixMilli())
	tests := []struct {
		name, method, target string
		hdr                  map[string]string
		body                 string
		status               int
		answer               string
		stored               string // event name expected in the export; "" none
	}{
		{"browser batch: track/ base64 array, verbose", "POST", "/track/?verbose=1&ip=1&_=" + cb, map[string]string{"Content-Type": formCT},
			"data=" + url.QueryEscape(b64JSON("["+ev("b1")+"]")), 200, `{"status":1,"error":null}`, "b1"},
		{"browser single event: track/ base64 object", "POST", "/track/?ip=1&_=" + cb, map[string]string{"Content-Type": formCT},
			"data=" + url.QueryEscape(b64JSON(ev("b2"))), 200, "1", "b2"},
		{"browser JSON payload", "POST", "/track/?ip=1&_=" + cb, map[string]string{"Content-Type": formCT},
			"data=" + url.QueryEscape("["+ev("b3")+"]"), 200, "1", "b3"},
		{"sendBeacon: text/plain form", "POST", "/track/?ip=1&_=" + cb, map[string]string{"Content-Type": "text/plain;charset=UTF-8"},
			"data=" + url.QueryEscape(b64JSON("["+ev("b4")+"]")), 200, "1", "b4"},
		{"text/plain form, data not first", "POST", "/track/", map[string]string{"Content-Type": "text/plain"},
			"ip=1&data=" + url.QueryEscape(ev("b5")), 200, "1", "b5"},
		{"img=1 GET", "GET", "/track/?img=1&ip=1&_=" + cb + "&data=" + url.QueryEscape(b64JSON(ev("b6"))), nil, "", 200, "1", "b6"},
		{"JSONP-era GET with callback", "GET", "/track?callback=mixpanel._jsc%5B1%5D&test=1&data=" + url.QueryEscape(b64JSON(ev("b7"))), nil, "", 200, "1", "b7"},
		{"Node SDK GET", "GET", "/track?ip=0&verbose=0&data=" + url.QueryEscape(b64JSON(ev("n1"))), map[string]string{"basic": iSecS + ":"}, "", 200, "1", "n1"},
		{"Go SDK JSON array", "POST", "/track?verbose=1", map[string]string{"Content-Type": "application/json", "Accept": "text/plain"},
			"[" + ev("g1") + "]", 200, `{"status":1,"error":null}`, "g1"},
		{"a path under track/ is not track", "POST", "/track/x", map[string]string{"Content-Type": formCT}, "data=" + url.QueryEscape(ev("no")), 404, "", ""},
	}
	for _, tc := range tests {
		r := e.do(tc.method, tc.target, tc.hdr, tc.body)
		if r.Status != tc.status || tc.answer != "" && strings.TrimSpace(string(r.Body)) != tc.answer {
			t.Errorf("%s: %s; want %d %s", tc.name, r, tc.status, tc.answer)
		}
	}
	got := e.exportNames(iSecS)
	for _, tc := range tests {
		if tc.stored != "" && len(got[tc.stored]) != 1 {
			t.Errorf("%s: event %s stored %d times", tc.name, tc.stored, len(got[tc.stored]))
		}
	}
	if len(got["no"]) != 0 {
		t.Error("the request to /track/x was stored")
	}
}

// TestVerbosePartialFailure: a verbose batch with some bad records says
// so; status 1 keeps the SDKs from retrying the records that were stored.
func TestVerbosePartialFailure(t *testing.T) {
	e := newIngestEnv(t)
	batch := "[" + trackEvent("ok", iTokS, "u") + `,{"event":"x","properties":{"token":"nope"}}]`
	r := e.do("POST", "/track/?verbose=1", map[string]string{"Content-Type": formCT}, "data="+url.QueryEscape(b64JSON(batch)))
	m := r.json(t)
	msg, _ := m["error"].(string)
	if m["status"] != json.Number("1") || !strings.Contains(msg, "1 of 2 records failed validation; first: record 1: 'properties.token' is invalid") {
		t.Errorf("partial batch: %s", r)
	}
	r = e.do("POST", "/track/?verbose=1", map[string]string{"Content-Type": formCT}, "data="+url.QueryEscape(`[{"event":"x","properties":{}}]`))
	if m := r.json(t); m["status"] != json.Number("0") || !strings.Contains(fmt.Sprint(m["error"]), "properties.token") {
		t.Errorf("all bad: %s", r)
	}
	upd := `[{"$token":"` + iTokS + `","$distinct_id":"p1","$set":{"a":1}},{"$token":"` + iTokS + `","$distinct_id":"p1","$add":{"n":"x"}}]`
	r = e.do("POST", "/engage/?verbose=1", map[string]string{"Content-Type": formCT}, "data="+url.QueryEscape(b64JSON(upd)))
	if m := r.json(t); m["status"] != json.Number("1") || !strings.Contains(fmt.Sprint(m["error"]), "1 of 2 updates failed; first: update 1: ") {
		t.Errorf("partial engage: %s", r)
	}
}

func TestImportAnswers(t *testing.T) {
	e := newIngestEnv(t)
	secret := map[string]string{"basic": iSecS + ":", "Content-Type": "application/json"}
	form := map[string]string{"basic": iSecS + ":", "Content-Type": formCT}
	beacon := map[string]string{"basic": iSecS + ":", "Content-Type": "text/plain"}
	ev := func(name string) string { return trackEvent(name, iTokS, "u-"+name) }
	future := fmt.Sprintf(`{"event":"late","properties":{"time":%d,"distinct_id":"u","$insert_id":"late-1"}}`, time.Now().Add(2*time.Hour).Unix())
	tests := []struct {
		name, method, target string
		hdr                  map[string]string
		body                 string
		status               int
		answer               string // exact body, or a JSON object's fields
		fields               map[string]string
	}{
		{"JSON strict=1", "POST", "/import?strict=1", secret, "[" + ev("i1") + "]", 200, `{"code":200,"num_records_imported":1,"status":"OK"}`, nil},
		{"JSON strict=0 (mixpanel-go Strict:false)", "POST", "/import?strict=0&verbose=1", secret, "[" + ev("i2") + "," + ev("i3") + "]", 200,
			`{"code":200,"num_records_imported":2,"status":"OK"}`, nil},
		{"JSON strict=0 with a bad record", "POST", "/import/?strict=0", secret, "[" + ev("i4") + "," + future + "]", 200, "",
			map[string]string{"code": "200", "num_records_imported": "1", "status": "OK"}},
		{"JSON strict=0, malformed", "POST", "/import?strict=0", secret, "[{", 400, "", map[string]string{"code": "400", "status": "Bad Request"}},
		{"trailing slash", "POST", "/import/", secret, "[" + ev("i5") + "]", 200, `{"code":200,"num_records_imported":1,"status":"OK"}`, nil},
		{"form base64", "POST", "/import", form, "data=" + url.QueryEscape(b64JSON("["+ev("i6")+"]")), 200, "1", nil},
		{"form, verbose", "POST", "/import?verbose=1", form, "data=" + url.QueryEscape(b64JSON("["+ev("i7")+"]")), 200, `{"status":1,"error":null}`, nil},
		{"Node SDK import(): GET ?data=", "GET", "/import?ip=0&verbose=0&data=" + url.QueryEscape(b64JSON(ev("i8"))), map[string]string{"basic": iSecS + ":"}, "", 200, "1", nil},
		{"text/plain form body", "POST", "/import", beacon, "data=" + url.QueryEscape(ev("i9")), 200, "1", nil},
		{"GET without data", "GET", "/import?verbose=1", map[string]string{"basic": iSecS + ":"}, "", 200, "",
			map[string]string{"status": "0", "error": "bad body: missing data parameter"}},
		{"GET needs credentials too", "GET", "/import?data=" + url.QueryEscape(b64JSON(ev("i10"))), nil, "", 401, "", map[string]string{"code": "401"}},
		{"DELETE", "DELETE", "/import", secret, "", 405, "", map[string]string{"error": "use POST, or GET with the data= parameter"}},
	}
	for _, tc := range tests {
		r := e.do(tc.method, tc.target, tc.hdr, tc.body)
		if r.Status != tc.status || tc.answer != "" && strings.TrimSpace(string(r.Body)) != tc.answer {
			t.Errorf("%s: %s; want %d %s", tc.name, r, tc.status, tc.answer)
			continue
		}
		if tc.fields != nil {
			m := r.json(t)
			for k, v := range tc.fields {
				if fmt.Sprint(m[k]) != v {
					t.Errorf("%s: %s = %v, want %s (%s)", tc.name, k, m[k], v, r)
				}
			}
		}
	}
	// The lenient 200 lists what it dropped, naming the rule it broke.
	r := e.do("POST", "/import?strict=0", secret, "["+ev("i11")+","+future+"]")
	var lenient lenientOK
	if err := json.Unmarshal(r.Body, &lenient); err != nil || len(lenient.Failed) != 1 || lenient.Failed[0].Index != 1 ||
		!futureMessage.MatchString(lenient.Failed[0].Message) {
		t.Errorf("strict=0 failed_records: %s", r)
	}
	got := e.exportNames(iSecS)
	for i := 1; i <= 11; i++ {
		if want := map[int]int{10: 0}[i]; i != 10 && len(got[fmt.Sprint("i", i)]) != 1 || i == 10 && len(got["i10"]) != want {
			t.Errorf("event i%d stored %d times", i, len(got[fmt.Sprint("i", i)]))
		}
	}
	if len(got["late"]) != 0 {
		t.Error("an event 2 hours ahead was stored")
	}
}

// TestIdentityShapes: the identity calls of the SDKs, read back through
// export and engage.
func TestIdentityShapes(t *testing.T) {
	e := newIngestEnv(t)
	const dev = "$device:3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	now := time.Now().Unix() - 60
	track := func(tok, body string) {
		t.Helper()
		if r := e.do("POST", "/track/?ip=1", map[string]string{"Content-Type": formCT}, "data="+url.QueryEscape(b64JSON(body))); strings.TrimSpace(string(r.Body)) != "1" {
			t.Fatalf("track %s: %s", body, r)
		}
	}
	// mixpanel-browser on an Original ID Merge project: anonymous events
	// under "$device:<uuid>", then identify().
	track(iTokO, fmt.Sprintf(`[{"event":"pre-login","properties":{"token":%q,"distinct_id":%q,"$device_id":%q,"time":%d}}]`, iTokO, dev, dev[8:], now))
	track(iTokO, fmt.Sprintf(`[{"event":"$identify","properties":{"token":%q,"distinct_id":"alice","$anon_distinct_id":%q,"$user_id":"alice","$device_id":%q,"time":%d}}]`,
		iTokO, dev, dev[8:], now+1))
	got := e.exportNames(iSecO)
	if !slices.Equal(got["pre-login"], []string{"alice"}) || !slices.Equal(got["$identify"], []string{"alice"}) {
		t.Errorf("after identify(): %v; want every event under alice", got)
	}

	// mixpanel-go Merge: form data= $merge, no token, API secret, /import.
	merge := func(secret, a, b string) ingestReply {
		body := fmt.Sprintf(`{"event":"$merge","properties":{"$distinct_ids":[%q,%q]}}`, a, b)
		return e.do("POST", "/import", map[string]string{"basic": secret + ":", "Content-Type": formCT, "Accept": "text/plain"}, "data="+url.QueryEscape(body))
	}
	track(iTokO, fmt.Sprintf(`{"event":"other","properties":{"token":%q,"distinct_id":"bob","time":%d}}`, iTokO, now))
	if r := merge(iSecO, "alice", "bob"); strings.TrimSpace(string(r.Body)) != "1" {
		t.Errorf("token-less $merge with the secret: %s", r)
	}
	if got := e.exportNames(iSecO); len(got["other"]) != 1 || got["other"][0] != "alice" && got["other"][0] != "bob" || got["other"][0] != got["pre-login"][0] {
		t.Errorf("after $merge: %v; want one cluster", got)
	}
	// Simplified ID Merge: accepted, changes nothing.
	if r := merge(iSecS, "x1", "x2"); strings.TrimSpace(string(r.Body)) != "1" {
		t.Errorf("$merge on a Simplified project: %s", r)
	}
	// The project token is not a credential that names the project for a merge.
	r := e.do("POST", "/import?verbose=1", map[string]string{"basic": iTokO + ":", "Content-Type": formCT},
		"data="+url.QueryEscape(`{"event":"$merge","properties":{"$distinct_ids":["a","b"]}}`))
	if m := r.json(t); m["status"] != json.Number("0") || !strings.Contains(fmt.Sprint(m["error"]), "$merge is accepted only with the project secret") {
		t.Errorf("$merge with token auth: %s", r)
	}
}

// TestTokenlessProfiles: mixpanel-import sends /engage and /groups updates
// without $token when a secret or service account authenticates.
func TestTokenlessProfiles(t *testing.T) {
	e := newIngestEnv(t)
	q := "?ip=0&verbose=1&strict=1"
	hdr := func(user, pass string) map[string]string {
		return map[string]string{"basic": user + ":" + pass, "Content-Type": "application/json", "Accept": "application/json"}
	}
	tests := []struct {
		name, target string
		hdr          map[string]string
		body         string
		status       int
		answer       string
		contains     string
	}{
		{"secret", "/engage" + q, hdr(iSecS, ""), `[{"$distinct_id":"t1","$set":{"plan":"pro"}}]`, 200, `{"status":1,"error":null}`, ""},
		{"service account + project_id", "/engage" + q + "&project_id=1", hdr(iOwner, iOwnerS), `[{"$distinct_id":"t2","$set":{"plan":"pro"}}]`, 200, `{"status":1,"error":null}`, ""},
		{"groups with the secret", "/groups" + q, hdr(iSecS, ""), `[{"$group_key":"company","$group_id":"acme","$set":{"size":5}}]`, 200, `{"status":1,"error":null}`, ""},
		{"no credentials", "/engage?verbose=1", map[string]string{"Content-Type": "application/json"}, `[{"$distinct_id":"t3","$set":{"a":1}}]`, 200, "",
			"'$token' is invalid: missing; send the project token in $token, or authenticate the request with the project's API secret or a service account"},
		{"wrong secret", "/engage?verbose=1", hdr("not-a-secret", ""), `[{"$distinct_id":"t4","$set":{"a":1}}]`, 200, "",
			"the request's credentials were refused: unauthorized: invalid credentials"},
		{"read-only service account", "/engage?verbose=1&project_id=1", hdr(iAnalyst, iAnalystS), `[{"$distinct_id":"t5","$set":{"a":1}}]`, 200, "",
			`has role analyst in project 1; writing needs owner or admin`},
		{"$token wins over the credentials", "/engage?verbose=1", hdr("not-a-secret", ""), `[{"$token":"` + iTokS + `","$distinct_id":"t6","$set":{"a":1}}]`, 200,
			`{"status":1,"error":null}`, ""},
	}
	for _, tc := range tests {
		r := e.do("POST", tc.target, tc.hdr, tc.body)
		if r.Status != tc.status || tc.answer != "" && strings.TrimSpace(string(r.Body)) != tc.answer ||
			tc.contains != "" && !strings.Contains(string(r.Body), tc.contains) {
			t.Errorf("%s: %s", tc.name, r)
		}
	}
	for id, want := range map[string]bool{"t1": true, "t2": true, "t3": false, "t4": false, "t5": false, "t6": true} {
		if p := e.profile(iSecS, id); (p != nil) != want {
			t.Errorf("profile %s: %v, want stored %v", id, p, want)
		}
	}
}

// TestOriginRestriction: a project with cors_allowed_origins takes
// browser requests from those origins only; servers (no Origin) as ever.
func TestOriginRestriction(t *testing.T) {
	e := newIngestEnv(t)
	send := func(origin, name string) ingestReply {
		hdr := map[string]string{"Content-Type": formCT}
		if origin != "" {
			hdr["Origin"] = origin
		}
		return e.do("POST", "/track/?verbose=1", hdr, "data="+url.QueryEscape(b64JSON(trackEvent(name, iTokR, "u"))))
	}
	r := send(shopOrigin, "from-shop")
	if r.Header.Get("Access-Control-Allow-Origin") != shopOrigin || r.Header.Get("Access-Control-Allow-Credentials") != "true" || r.json(t)["status"] != json.Number("1") {
		t.Errorf("listed origin: %s %v", r, r.Header)
	}
	r = send("https://evil.example", "from-evil")
	if m := r.json(t); m["status"] != json.Number("0") || !strings.Contains(fmt.Sprint(m["error"]), `project 3 does not accept browser requests from origin "https://evil.example" (cors_allowed_origins)`) {
		t.Errorf("other origin: %s", r)
	}
	if v := r.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("other origin got Access-Control-Allow-Origin %q", v)
	}
	if r := send("", "from-server"); r.json(t)["status"] != json.Number("1") {
		t.Errorf("no Origin: %s", r)
	}
	upd := `{"$token":"` + iTokR + `","$distinct_id":"p","$set":{"a":1}}`
	r = e.do("POST", "/engage/?verbose=1", map[string]string{"Content-Type": formCT, "Origin": "https://evil.example"}, "data="+url.QueryEscape(upd))
	if m := r.json(t); m["status"] != json.Number("0") || !strings.Contains(fmt.Sprint(m["error"]), "cors_allowed_origins") {
		t.Errorf("engage from another origin: %s", r)
	}
	got := e.exportNames(iSecR)
	if len(got["from-shop"]) != 1 || len(got["from-server"]) != 1 || len(got["from-evil"]) != 0 {
		t.Errorf("stored %v", got)
	}
	if e.profile(iSecR, "p") != nil {
		t.Error("a profile update from a refused origin was applied")
	}
}

func TestFormBody(t *testing.T) {
	for body, want := range map[string]bool{
		"data=eyJhIjoxfQ%3D%3D":   true,
		"  data=x":                true,
		"ip=1&data=x":             true,
		`[{"event":"data=x"}]`:    false,
		` {"a":"&data="}`:         false,
		"":                        false,
		"metadata=x":              false,
		"eyJhIjoxfQ==":            false,
		"verbose=1&strict=0":      false,
		"data":                    false,
		"\n[{\"event\":\"e\"}]\n": false,
	} {
		if got := formBody([]byte(body)); got != want {
			t.Errorf("formBody(%q) = %v, want %v", body, got, want)
		}
	}
}
