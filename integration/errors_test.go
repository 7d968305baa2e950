package integration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Raw-request tests of every refusal /import can give: who may write, and
// that a refused request leaves nothing behind.

func TestImportUnauthorized(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	cases := []struct {
		name    string
		auth    authFn
		query   url.Values
		wantMsg string // a fragment the error must contain
	}{
		{"no Authorization header", noAuth, nil, "missing"},
		{"wrong API secret", basicAuth("no-such-secret-1", ""), nil, "invalid"},
		{"wrong service account secret", basicAuth(ownerSA, "wrong-secret-1"), projectQ(mainID), "invalid service account"},
		{"unknown service account", basicAuth("nobody", "whatever-secret"), projectQ(mainID), "invalid service account"},
		{"multi-project account without project_id", basicAuth(multiSA, multiSecret), nil, "project_id"},
		{"account not a member of the project", basicAuth(ownerSA, ownerSecret), projectQ(otherID), "not a member"},
		{"API secret of another project", basicAuth(mainSecret, ""), projectQ(otherID), ""},
		{"garbage bearer token", bearerAuth("trb_not-a-real-token"), projectQ(mainID), "OAuth"},
		{"empty bearer token", bearerAuth(""), projectQ(mainID), ""},
		{"unsupported scheme", func(r *http.Request) { r.Header.Set("Authorization", "Digest abc") }, nil, ""},
	}
	for _, c := range cases {
		r := s.importEvents(t, c.auth, c.query, events("unauthorized", 2))
		msg := wantError(t, r, http.StatusUnauthorized, "Unauthorized")
		if !strings.Contains(msg, c.wantMsg) {
			t.Errorf("%s: error %q does not mention %q", c.name, msg, c.wantMsg)
		}
	}
	// The accepted forms, for contrast: the SA with project_id (multi-project
	// account), the project token as Basic user, and the API secret.
	wantImported(t, s.importEvents(t, basicAuth(multiSA, multiSecret), projectQ(mainID), events("ok-sa", 1)), 1)
	wantImported(t, s.importEvents(t, basicAuth(mainToken, ""), nil, events("ok-token", 1)), 1)
	wantImported(t, s.importEvents(t, asSecret, nil, events("ok-secret", 1)), 1)

	got := s.export(t, asOwner, mainID, nil)
	if len(got) != 3 {
		t.Fatalf("export after refused requests: %d events, want only the 3 accepted", len(got))
	}
	for _, e := range got {
		if !strings.HasPrefix(e.Event, "ok-") {
			t.Errorf("a refused request stored %q", e.Event)
		}
	}
	// The project token may import but not read.
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(0, nil), Auth: basicAuth(mainToken, "")})
	wantError(t, r, http.StatusUnauthorized, "Unauthorized")
}

func TestImportForbidden(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	analyst := basicAuth(analystSA, analystSec)
	msg := wantError(t, s.importEvents(t, analyst, projectQ(mainID), events("analyst", 3)), http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, "analyst") {
		t.Errorf("403 for the analyst does not name the role: %q", msg)
	}
	// An analyst may read, and finds nothing was stored.
	if got := s.export(t, analyst, mainID, nil); len(got) != 0 {
		t.Fatalf("analyst's refused import stored %d events", len(got))
	}

	// The EU project on a US server: refused with the right host named,
	// whether by secret or by service account, for writes and reads.
	for _, a := range []struct {
		name string
		auth authFn
		q    url.Values
	}{{"secret", basicAuth(euSecret, ""), nil}, {"service account", basicAuth(euSA, euSASecret), projectQ(euID)}} {
		msg := wantError(t, s.importEvents(t, a.auth, a.q, events("eu-event", 2)), http.StatusForbidden, "Forbidden")
		if !strings.Contains(msg, "api-eu") {
			t.Errorf("EU project via %s: 403 message %q does not name the api-eu host", a.name, msg)
		}
		r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(0, a.q), Auth: a.auth})
		wantError(t, r, http.StatusForbidden, "Forbidden")
	}

	// Nothing reached the store: the same data directory served as an EU
	// server exports nothing for the EU project, then accepts its writes.
	s.Cfg.Region = "eu"
	s.Restart()
	euAuth := basicAuth(euSecret, "")
	if got := s.export(t, euAuth, 0, nil); len(got) != 0 {
		t.Fatalf("EU project holds %d events refused by the US server", len(got))
	}
	wantImported(t, s.importEvents(t, euAuth, nil, events("eu-event", 2)), 2)
	if got := s.export(t, euAuth, 0, nil); len(got) != 2 {
		t.Fatalf("EU server: export %d events, want 2", len(got))
	}
	// And now the US project is the foreign one.
	msg = wantError(t, s.importEvents(t, asSecret, nil, events("us-event", 1)), http.StatusForbidden, "Forbidden")
	if !strings.Contains(msg, "api ") && !strings.Contains(msg, "api.") && !strings.HasSuffix(msg, "api") {
		t.Errorf("US project on an EU server: message %q does not name the api host", msg)
	}
}

func TestImportRateLimited(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	tiny := basicAuth(tinySecret, "")
	first, second := events("limited", 10), events("limited", 10)
	b1, b2 := mustJSON(t, first), mustJSON(t, second)
	if len(b1) > tinyLimitKiB<<10 || len(b1)+len(b2) <= tinyLimitKiB<<10 {
		t.Fatalf("test bodies of %d and %d bytes do not straddle the %d KiB limit", len(b1), len(b2), tinyLimitKiB)
	}
	wantImported(t, s.do(t, request{Path: "/import", Auth: tiny, Body: b1}), 10)
	r := s.do(t, request{Path: "/import", Auth: tiny, Body: b2})
	msg := wantError(t, r, http.StatusTooManyRequests, "Too Many Requests")
	if !strings.Contains(strings.ToLower(msg), "rate limit") {
		t.Errorf("429 message %q", msg)
	}
	// The budget is per project: the main project is unaffected.
	wantImported(t, s.importEvents(t, asSecret, nil, events("unlimited", 10)), 10)
	got := byInsertID(t, s.export(t, tiny, 0, nil))
	if len(got) != 10 {
		t.Fatalf("tiny project holds %d events, want the 10 of the first request", len(got))
	}
	for _, id := range insertIDs(first) {
		if _, ok := got[id]; !ok {
			t.Fatalf("accepted event %s missing", id)
		}
	}
}

func TestImportMalformedBody(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	valid := string(mustJSON(t, events("malformed", 1)[0]))
	cases := []struct {
		name string
		body string
		hdr  map[string]string
	}{
		{"truncated array", "[" + valid + `, {"event":"x","properties":{`, nil},
		{"garbage between elements", "[" + valid + " x " + valid + "]", nil},
		{"not JSON", "hello world", nil},
		{"trailing garbage", "[" + valid + "] junk", nil},
		{"empty array", "[]", nil},
		{"empty body", "", nil},
		{"gzip header, plain body", "[" + valid + "]", map[string]string{"Content-Encoding": "gzip"}},
		{"unknown encoding", "[" + valid + "]", map[string]string{"Content-Encoding": "br"}},
	}
	for _, c := range cases {
		r := s.do(t, request{Path: "/import", Auth: asSecret, Query: url.Values{"strict": {"1"}}, Header: c.hdr, Body: []byte(c.body)})
		if r.Status != http.StatusBadRequest {
			t.Errorf("%s: want 400, got %s", c.name, r)
			continue
		}
		wantError(t, r, http.StatusBadRequest, "Bad Request")
	}
	if got := s.export(t, asSecret, 0, nil); len(got) != 0 {
		t.Fatalf("malformed requests stored %d events", len(got))
	}
}

func TestImportPartiallyValidBatch(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	good := events("partial", 5)
	at := good[0]["properties"].(map[string]any)["time"].(int64)
	props := func(kv ...any) map[string]any {
		m := map[string]any{"time": at, "distinct_id": "u", "$insert_id": uid("p")}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	msEvent := map[string]any{"event": "ms", "properties": props("time", at*1000+7)} // milliseconds are valid
	recs := []any{
		good[0],
		map[string]any{"properties": props()}, // 1: no event name
		good[1],
		map[string]any{"event": "x", "properties": "not an object"},          // 3
		map[string]any{"event": "x", "properties": props("time", 100*86400)}, // 4: in 1970
		good[2], // 5
		map[string]any{"event": "x", "properties": props("$insert_id", strings.Repeat("a", 37))}, // 6: 37 bytes
		map[string]any{"event": "x", "properties": props(), "extra": 1},                          // 7: unknown key
		42, // 8: not an object
		good[3],
		msEvent,
		good[4],
	}
	r := s.importEvents(t, asSecret, nil, recs)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("want 400, got %s", r)
	}
	m := r.JSON(t)
	if m["code"] != jsonNum(400) || m["status"] != "Bad Request" || m["num_records_imported"] != jsonNum(6) {
		t.Fatalf("400 body %s: want code 400, status Bad Request, 6 imported", r.Body)
	}
	want := map[int64]string{1: "event", 3: "properties", 4: "properties.time", 6: "properties.$insert_id", 7: "extra", 8: ""}
	failed, _ := m["failed_records"].([]any)
	if len(failed) != len(want) {
		t.Fatalf("failed_records %v, want indexes 1,3,4,6,7,8", failed)
	}
	for _, f := range failed {
		fr := f.(map[string]any)
		idx := num(t, fr["index"])
		field, ok := want[idx]
		if !ok || fr["field"] != field {
			t.Errorf("failed record %v: want index in %v with field %q", fr, want, field)
		}
		if msg, _ := fr["message"].(string); msg == "" {
			t.Errorf("failed record %v has no message", fr)
		}
		if _, ok := fr["insert_id"].(string); !ok {
			t.Errorf("failed record %v has no insert_id string", fr)
		}
	}
	stored := s.export(t, asSecret, 0, nil)
	wantIDs := append(insertIDs(good), msEvent["properties"].(map[string]any)["$insert_id"].(string))
	if got := exportedIDs(stored); !sameStrings(got, sortedCopy(wantIDs)) {
		t.Fatalf("stored %v, want exactly the 6 valid records %v", got, sortedCopy(wantIDs))
	}
}
