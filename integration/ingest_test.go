package integration

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Accepted-path tests over raw HTTP: deduplication (also across restarts),
// body formats (NDJSON, legacy form), $merge, health and metrics.

func TestDedupAcrossRequestsAndRestarts(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	batch := events("dedup", 100)
	wantImported(t, s.importEvents(t, asSecret, nil, batch), 100)
	// A retry of the whole batch is acknowledged in full, stored once.
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), batch), 100)

	p := func(i int) map[string]any { return batch[i]["properties"].(map[string]any) }
	clone := func(i int, k string, v any) map[string]any {
		q := map[string]any{}
		for kk, vv := range p(i) {
			q[kk] = vv
		}
		q[k] = v
		return map[string]any{"event": batch[i]["event"], "properties": q}
	}
	other := clone(1, "distinct_id", "someone-else") // another user: a new event
	extra := []any{
		clone(0, "plan", "free"),                    // same key, other props: a duplicate; the first copy wins
		clone(0, "time", p(0)["time"].(int64)*1000), // the same instant in milliseconds: a duplicate
		other, other, // a duplicate inside one request is stored once
		clone(2, "time", p(2)["time"].(int64)*1000+1), // one millisecond later: a new event
	}
	wantImported(t, s.importEvents(t, asSecret, nil, extra), 5)
	noID := event("no-insert-id", "u1", "", time.Now().Add(-time.Hour), nil)
	wantImported(t, s.importEvents(t, asSecret, nil, []any{noID, noID}), 2)

	check := func(when string) {
		t.Helper()
		got := s.export(t, asSecret, 0, nil)
		counts := map[string]int{}
		for _, e := range got {
			counts[e.Event]++
			if e.Event == "dedup" && e.InsertID() == p(0)["$insert_id"] && e.Properties["plan"] != "pro" {
				t.Errorf("%s: the retried copy replaced the first (plan %v)", when, e.Properties["plan"])
			}
		}
		// 100 + another user + one ms later; events without $insert_id are never deduplicated.
		if counts["dedup"] != 102 || counts["no-insert-id"] != 2 || len(got) != 104 {
			t.Fatalf("%s: export counts %v (%d lines), want dedup:102 no-insert-id:2", when, counts, len(got))
		}
	}
	check("before restart")

	s.Kill()
	s.Start()
	check("after SIGKILL and restart")
	wantImported(t, s.importEvents(t, asSecret, nil, batch), 100)
	wantImported(t, s.importEvents(t, asSecret, nil, extra), 5)
	check("after retrying everything post-crash")

	s.Restart()
	wantImported(t, s.importEvents(t, asSecret, nil, batch), 100)
	check("after a graceful restart and another retry")
}

func TestNDJSONBody(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	evs := events("ndjson", 4)
	var b bytes.Buffer
	for i, e := range evs {
		b.Write(mustJSON(t, e))
		if i == 1 {
			b.WriteString("\r\n\n") // CRLF and a blank line are tolerated
		} else {
			b.WriteString("\n")
		}
	}
	nd := map[string]string{"Content-Type": "application/x-ndjson"}
	wantImported(t, s.do(t, request{Path: "/import", Auth: asSecret, Header: nd, Body: b.Bytes()}), 4)

	// Gzip-compressed NDJSON, with one broken line: only that line fails.
	more := events("ndjson", 3)
	body := string(mustJSON(t, more[0])) + "\n{\"event\":\"broken\",\n" + string(mustJSON(t, more[2])) + "\n"
	r := s.do(t, request{Path: "/import", Auth: asOwner, Query: projectQ(mainID),
		Header: map[string]string{"Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"},
		Body:   gzipped(t, []byte(body))})
	if r.Status != http.StatusBadRequest {
		t.Fatalf("NDJSON with a broken line: want 400, got %s", r)
	}
	m := r.JSON(t)
	failed, _ := m["failed_records"].([]any)
	if m["num_records_imported"] != jsonNum(2) || len(failed) != 1 || num(t, failed[0].(map[string]any)["index"]) != 1 {
		t.Fatalf("NDJSON with a broken line: %s; want 2 imported, index 1 failed", r.Body)
	}
	want := append(insertIDs(evs), insertIDs([]map[string]any{more[0], more[2]})...)
	if got := exportedIDs(s.export(t, asSecret, 0, nil)); !sameStrings(got, sortedCopy(want)) {
		t.Fatalf("stored %v, want %v", got, sortedCopy(want))
	}
}

func TestLegacyFormBodies(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	var want []string
	legacy := func(name string, rq request, wantBody string) {
		t.Helper()
		rq.Path, rq.Auth = "/import", asSecret
		r := s.do(t, rq)
		if r.Status != http.StatusOK || strings.TrimSpace(string(r.Body)) != wantBody {
			t.Errorf("%s: want 200 %s, got %s", name, wantBody, r)
		}
	}
	a, b, c, d := events("legacy", 3), events("legacy", 2), events("legacy", 1), events("legacy", 2)
	want = append(want, insertIDs(a)...)
	legacy("base64 data= array", request{Header: form, Body: []byte("data=" + url.QueryEscape(b64(mustJSON(t, a))))}, "1")
	want = append(want, insertIDs(b)...)
	legacy("base64 data= with verbose=1", request{Header: form, Query: url.Values{"verbose": {"1"}},
		Body: []byte("data=" + url.QueryEscape(b64(mustJSON(t, b))))}, `{"status":1,"error":null}`)
	want = append(want, insertIDs(c)...)
	legacy("raw JSON data= single object", request{Header: form, Body: []byte("data=" + url.QueryEscape(string(mustJSON(t, c[0]))))}, "1")
	want = append(want, insertIDs(d)...)
	legacy("data= in the query, empty body", request{Query: url.Values{"data": {b64(mustJSON(t, d))}}}, "1")

	bad := []any{map[string]any{"event": "legacy", "properties": map[string]any{"time": "not a time", "distinct_id": "u"}}}
	legacy("no valid record", request{Header: form, Body: []byte("data=" + url.QueryEscape(b64(mustJSON(t, bad))))}, "0")
	r := s.do(t, request{Path: "/import", Auth: asSecret, Header: form, Query: url.Values{"verbose": {"1"}},
		Body: []byte("data=" + url.QueryEscape(b64(mustJSON(t, bad))))})
	m := r.JSON(t)
	if msg, _ := m["error"].(string); r.Status != http.StatusOK || m["status"] != jsonNum(0) || msg == "" {
		t.Errorf("no valid record, verbose: want {status:0,error:…}, got %s", r)
	}

	// strict=0 with a JSON body validates leniently but answers with the
	// JSON body, whose count mixpanel-go and mixpanel-import read.
	e := events("legacy", 2)
	want = append(want, insertIDs(e)...)
	wantImported(t, s.do(t, request{Path: "/import", Auth: asSecret, Query: url.Values{"strict": {"0"}}, Body: mustJSON(t, e)}), 2)

	if got := exportedIDs(s.export(t, asSecret, 0, nil)); !sameStrings(got, sortedCopy(want)) {
		t.Fatalf("stored %v, want %v", got, sortedCopy(want))
	}
}

func TestMergeRecords(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	merge := func(token string) []any {
		return []any{map[string]any{"event": "$merge", "properties": map[string]any{"$distinct_ids": []string{"anon-1", "user-1"}, "token": token}}}
	}
	wantImported(t, s.importEvents(t, asSecret, nil, merge(mainToken)), 1)
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), merge(mainToken)), 1)
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	r := s.do(t, request{Path: "/import", Auth: asSecret, Header: form,
		Body: []byte("data=" + url.QueryEscape(string(mustJSON(t, merge(mainToken)[0]))))})
	if r.Status != http.StatusOK || string(bytes.TrimSpace(r.Body)) != "1" {
		t.Errorf("form $merge with the secret: want 200 1, got %s", r)
	}
	for _, c := range []struct {
		name  string
		auth  authFn
		body  []any
		field string
	}{
		{"wrong token", asSecret, merge(otherToken), "properties.token"},
		{"project token auth", basicAuth(mainToken, ""), merge(mainToken), "event"},
		{"three ids", asSecret, []any{map[string]any{"event": "$merge", "properties": map[string]any{"$distinct_ids": []string{"a", "b", "c"}, "token": mainToken}}}, "properties.$distinct_ids"},
	} {
		r := s.importEvents(t, c.auth, nil, c.body)
		m := r.JSON(t)
		failed, _ := m["failed_records"].([]any)
		if r.Status != http.StatusBadRequest || len(failed) != 1 || failed[0].(map[string]any)["field"] != c.field {
			t.Errorf("$merge %s: want 400 with field %s, got %s", c.name, c.field, r)
		}
	}
}

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MetricsTok = "scrape-token-0123456789"
	s := startServer(t, cfg)
	r := s.do(t, request{Method: http.MethodGet, Path: "/healthz"})
	if m := r.JSON(t); r.Status != http.StatusOK || m["status"] != "ok" {
		t.Fatalf("healthz: %s", r)
	}
	batch := events("metrics", 5)
	wantImported(t, s.importEvents(t, asSecret, nil, batch), 5)
	wantImported(t, s.importEvents(t, asSecret, nil, batch), 5)
	wantError(t, s.importEvents(t, noAuth, nil, batch), http.StatusUnauthorized, "Unauthorized")
	r = s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: bearerAuth(cfg.MetricsTok)})
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %s", r)
	}
	for _, line := range []string{
		`tributary_records_accepted_total{project="1"} 10`,
		`tributary_store_events_written_total{outcome="inserted"} 5`,
		`tributary_store_events_written_total{outcome="duplicate"} 5`,
		`tributary_http_requests_total{code="200",route="import"} 2`,
		`tributary_http_requests_total{code="401",route="import"} 1`,
	} {
		if !bytes.Contains(r.Body, []byte(line+"\n")) {
			t.Errorf("metrics lack %q", line)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", r.Body)
	}
	r = s.do(t, request{Method: http.MethodGet, Path: "/no/such/path"})
	wantError(t, r, http.StatusNotFound, "Not Found")
}

// /metrics takes the scrape token (every series) or a credential that may
// administer a project (that project's series only), nothing less.
func TestMetricsNeedAuth(t *testing.T) {
	cfg := defaultConfig()
	cfg.MetricsTok = "scrape-token-0123456789"
	s := startServer(t, cfg)
	for _, c := range []struct {
		name string
		auth authFn
		want int
		all  bool // every series, not one project's
	}{
		{"none", noAuth, 401, false},
		{"project token", basicAuth(mainToken, ""), 401, false},
		{"analyst", basicAuth(analystSA, analystSec), 401, false},
		{"wrong scrape token", bearerAuth("scrape-token-wrong-456789"), 401, false},
		{"API secret", asSecret, 200, false},
		{"owner", basicAuth(ownerSA, ownerSecret), 200, false},
		{"scrape token", bearerAuth("scrape-token-0123456789"), 200, true},
	} {
		r := s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: c.auth})
		if r.Status != c.want {
			t.Errorf("%s: %d, want %d: %s", c.name, r.Status, c.want, r.Body)
		}
		if c.want != 200 {
			continue
		}
		for _, m := range []string{"tributary_commit_queue_requests ", "tributary_commit_queue_records ", "tributary_sync_runs_active ", "tributary_sync_runs_owned "} {
			if got := strings.Contains(string(r.Body), "\n"+m); got != c.all {
				t.Errorf("%s: /metrics has %s: %v, want %v", c.name, m, got, c.all)
			}
		}
	}
}
