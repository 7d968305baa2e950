package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// The HTTP edge under hostile clients (docs/security.md, "HTTP edges"):
// slow bodies, too many connections, floods of the unauthenticated
// endpoints, odd OAuth client ids, other projects' metrics, numbers
// beyond float64, the migration service as a relay, and parallel lookup
// uploads. Each test also checks that the server still answers.

// trickle opens a connection that sends a request's headers and then one
// body byte every gap, and reports on done when the server closes it.
func trickle(t *testing.T, s *server, path string, gap time.Duration, done chan<- time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", path)
	go func() {
		for {
			if _, err := c.Write([]byte{' '}); err != nil {
				return
			}
			time.Sleep(gap)
		}
	}()
	go func() {
		_, _ = io.Copy(io.Discard, c) // until the server closes it (or the test does)
		done <- time.Since(start)
	}()
	return c
}

// scrape reads /metrics with the metrics token.
func scrape(t *testing.T, s *server) string {
	t.Helper()
	r := s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: bearerAuth(s.Cfg.MetricsTok)})
	if r.Status != http.StatusOK {
		t.Fatalf("metrics: %s", r)
	}
	return string(r.Body)
}

// Forty connections trickling a byte every two seconds, with room for
// sixteen: the ones admitted are cut once their bodies fall below
// body_min_rate after the 10 s grace, the others wait in the accept
// queue meanwhile (costing the server no descriptor) and are cut in
// turn; healthy requests get through as slots free up.
func TestEdgeSlowBodiesAndConnectionCap(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MetricsTok = "scrape-token-0123456789"
	cfg.Extra = map[string]any{"max_connections": 16}
	s := startServer(t, cfg)

	const n = 40
	done := make(chan time.Duration, n)
	for range n {
		c := trickle(t, s, "/track", 2*time.Second, done)
		defer c.Close()
	}
	time.Sleep(time.Second)
	quick := &http.Client{Timeout: 2 * time.Second}
	if resp, err := quick.Get(s.URL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a request got through while %d connections held the 16 slots: %s", n, resp.Status)
	}
	var longest time.Duration
	for range n {
		select {
		case d := <-done:
			longest = max(longest, d)
		case <-time.After(90 * time.Second):
			t.Fatal("trickling connections still open after 90 s")
		}
	}
	// Three rounds of sixteen, each cut at about 10 s.
	if longest > 60*time.Second {
		t.Fatalf("the last trickling connection was closed after %v", longest)
	}
	r := s.do(t, request{Method: http.MethodGet, Path: "/healthz"})
	if r.Status != http.StatusOK {
		t.Fatalf("healthz after the trickles: %s", r)
	}
	page := scrape(t, s)
	if open := metricValue(page, "tributary_http_connections_open"); open > 4 {
		t.Fatalf("%v connections still counted open", open)
	}
	if metricValue(page, "tributary_http_connections_max") != 16 {
		t.Fatalf("connections_max is not 16:\n%s", page)
	}
	if !strings.Contains(s.logs.String(), "max_connections reached") {
		t.Error("no warning that max_connections was reached")
	}
	t.Logf("%d trickling connections all closed by the server, the last after %v", n, longest.Round(time.Second))
}

// A large body on a slow link is not a trickle: 240 KB at about 16 KB/s
// (16 times body_min_rate) takes 15 s and is imported.
func TestEdgeSlowButSteadyBody(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	evs := events("steady", 600)
	for _, e := range evs {
		e["properties"].(map[string]any)["pad"] = strings.Repeat("p", 250)
	}
	body := mustJSON(t, evs)
	pr, pw := io.Pipe()
	go func() {
		for off := 0; off < len(body); off += 4096 {
			if _, err := pw.Write(body[off:min(off+4096, len(body))]); err != nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/import", pr)
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	asSecret(req)
	start := time.Now()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	wantImported(t, reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, 600)
	if took := time.Since(start); took < 10*time.Second {
		t.Fatalf("the body took only %v: not a test of a slow link", took)
	}
}

// /track, /engage and /groups take a public token: one address gets
// ip_requests_per_second (burst: two seconds' worth) across the three,
// then 429 with Retry-After in /track's error shape. Authenticated routes
// are not counted.
func TestEdgeTokenEndpointsPerAddress(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Extra = map[string]any{"ip_requests_per_second": 5}
	s := startServer(t, cfg)
	bodies := map[string][]byte{
		"/track":  mustJSON(t, []any{trackEvent("flood", mainToken, time.Now())}),
		"/engage": mustJSON(t, []any{map[string]any{"$token": mainToken, "$distinct_id": "u1", "$set": map[string]any{"a": 1}}}),
		"/groups": mustJSON(t, []any{map[string]any{"$token": mainToken, "$group_key": "company", "$group_id": "c1", "$set": map[string]any{"a": 1}}}),
	}
	var ok, limited int
	for i := range 25 {
		path := []string{"/track", "/engage", "/groups"}[i%3]
		r := s.do(t, request{Path: path, Body: bodies[path]})
		switch r.Status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			var e struct{ Error, Status string }
			if json.Unmarshal(r.Body, &e) != nil || e.Status != "error" || !strings.Contains(e.Error, "ip_requests_per_second") || r.Header.Get("Retry-After") == "" {
				t.Fatalf("429 of %s: %s %v", path, r, r.Header)
			}
		default:
			t.Fatalf("%s: %s", path, r)
		}
	}
	// The burst is 10; a request or two more may refill while the loop runs.
	if ok < 10 || ok > 13 || limited != 25-ok {
		t.Fatalf("%d answered, %d limited; want about 10 answered", ok, limited)
	}
	for range 5 {
		wantImported(t, s.importEvents(t, asSecret, nil, events("authed", 1)), 1)
	}
}

// /oauth/token: a client_id must be an account name exactly (one with a
// leading space got a token that never worked), and guessing a client's
// secret stops at its per-client limit.
func TestEdgeOAuthClientID(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	token := func(id, secret string, basic bool) reply {
		form := url.Values{"grant_type": {"client_credentials"}}
		rq := request{Path: "/oauth/token", Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
		if basic {
			rq.Auth = basicAuth(id, secret)
		} else {
			form.Set("client_id", id)
			form.Set("client_secret", secret)
		}
		rq.Body = []byte(form.Encode())
		r := s.do(t, rq)
		return r
	}
	for _, c := range []struct {
		id    string
		basic bool
		want  int
	}{
		{" " + ownerSA, false, 401},
		{ownerSA + " ", false, 401},
		{" " + ownerSA, true, 401},
		{strings.ToUpper(ownerSA), false, 401},
		{ownerSA, false, 200},
		{ownerSA, true, 200},
	} {
		r := token(c.id, ownerSecret, c.basic)
		if r.Status != c.want {
			t.Fatalf("client_id %q (basic %v): %s, want %d", c.id, c.basic, r, c.want)
		}
		if c.want == 200 {
			tok, _ := r.JSON(t)["access_token"].(string)
			wantImported(t, s.importEvents(t, bearerAuth(tok), projectQ(mainID), events("oauth", 1)), 1)
		} else if strings.Contains(string(r.Body), "access_token") {
			t.Fatalf("a token for %q: %s", c.id, r)
		}
	}
	// Per client: 60 at once, then one a second. Four were spent above.
	var refused reply
	for i := range 60 {
		if r := token(ownerSA, "wrong-secret", false); r.Status == http.StatusTooManyRequests {
			refused = r
			if i < 55 {
				t.Fatalf("limited after %d guesses", i)
			}
			break
		}
	}
	if refused.Status != http.StatusTooManyRequests || !strings.Contains(string(refused.Body), "slow_down") || refused.Header.Get("Retry-After") == "" {
		t.Fatalf("guessing was not limited: last answer %s", refused)
	}
	if r := token(ownerSA, ownerSecret, false); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the right secret right after the limit: %s", r)
	}
}

// /metrics with a project's credentials shows that project's series only;
// the metrics token sees every series.
func TestEdgeMetricsPerProject(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MetricsTok = "scrape-token-0123456789"
	s := startServer(t, cfg)
	wantImported(t, s.importEvents(t, asSecret, nil, events("m1", 2)), 2)
	wantImported(t, s.importEvents(t, basicAuth(otherSecret, ""), nil, events("m3", 3)), 3)
	for _, c := range []struct {
		name      string
		auth      authFn
		own, peer int64
	}{
		{"main's secret", asSecret, mainID, otherID},
		{"other's secret", basicAuth(otherSecret, ""), otherID, mainID},
		{"main's owner", asOwner, mainID, otherID},
	} {
		r := s.do(t, request{Method: http.MethodGet, Path: "/metrics", Auth: c.auth})
		page := string(r.Body)
		if r.Status != http.StatusOK || !strings.Contains(page, fmt.Sprintf(`tributary_records_accepted_total{project="%d"}`, c.own)) {
			t.Fatalf("%s: %s", c.name, r)
		}
		for _, leak := range []string{fmt.Sprintf(`project="%d"`, c.peer), "tributary_http_requests_total", "tributary_store_events_written_total", "tributary_commit_queue_records"} {
			if strings.Contains(page, leak) {
				t.Errorf("%s: /metrics shows %s", c.name, leak)
			}
		}
	}
	all := scrape(t, s)
	for _, want := range []string{`tributary_records_accepted_total{project="1"} 2`, `tributary_records_accepted_total{project="3"} 3`, "tributary_http_requests_total{"} {
		if !strings.Contains(all, want) {
			t.Errorf("the metrics token's page lacks %s", want)
		}
	}
}

// Numbers beyond int64 (integer literals) or float64 (others) fail their
// record naming the property, on /import and /track; in-range numbers
// are stored as sent.
func TestEdgeNumbersBeyondFloat64(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	twoTo64 := new(big.Int).Lsh(big.NewInt(1), 64).String()
	bad := []string{"1e400", "-1e400", twoTo64, "1" + strings.Repeat("0", 99), "9223372036854775808"}
	var batch []map[string]any
	for _, n := range bad {
		batch = append(batch, event("num", "u1", uid("n"), time.Now(), map[string]any{"n": json.Number(n)}))
	}
	okEv := event("num", "u1", uid("n"), time.Now(), map[string]any{"n": json.Number("9223372036854775807"), "f": json.Number("1.5e300")})
	batch = append(batch, okEv)
	r := s.importEvents(t, asSecret, nil, batch)
	if r.Status != http.StatusBadRequest {
		t.Fatalf("import: %s", r)
	}
	failed, _ := r.JSON(t)["failed_records"].([]any)
	if len(failed) != len(bad) {
		t.Fatalf("%d failed records, want %d: %s", len(failed), len(bad), r)
	}
	for _, f := range failed {
		m := f.(map[string]any)
		if m["field"] != "properties.n" || !strings.Contains(m["message"].(string), "number out of range") {
			t.Fatalf("failure %v", m)
		}
	}
	// /track in its lenient mode refuses them too.
	tr := trackEvent("num-track", mainToken, time.Now())
	tr["properties"].(map[string]any)["n"] = json.Number(twoTo64)
	if msg := wantVerbose(t, s.track(t, "POST", url.Values{"verbose": {"1"}}, "application/json", mustJSON(t, []any{tr}), nil), 0); !strings.Contains(msg, "properties.n") {
		t.Fatalf("/track: %s", msg)
	}
	r = s.importEvents(t, asSecret, nil, []map[string]any{okEv})
	if r.Status != http.StatusOK {
		t.Fatalf("in-range numbers: %s", r)
	}
	got := s.export(t, asSecret, 0, nil)
	if len(got) != 1 || got[0].Event != "num" {
		t.Fatalf("export: %+v", got)
	}
	raw := string(s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(mainID, nil), Auth: asSecret}).Body)
	if !strings.Contains(raw, `"n":9223372036854775807`) || !strings.Contains(raw, `"f":1.5e300`) || strings.Contains(raw, twoTo64) {
		t.Fatalf("export: %s", raw)
	}
}

// Profile updates follow the same rule: a $set, $set_once, $union or
// $append (or a group's $set) holding such a number fails naming the
// field and stores nothing of the update; the other updates of the batch
// are stored.
func TestEdgeNumbersBeyondFloat64InProfiles(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	twoTo64 := new(big.Int).Lsh(big.NewInt(1), 64).String()
	hundred := "1" + strings.Repeat("0", 99)
	q := url.Values{"verbose": {"1"}, "strict": {"1"}}
	hdr := map[string]string{"Accept": "application/json"}
	set := func(id, op string, props map[string]any) map[string]any {
		return map[string]any{"$distinct_id": id, "$ignore_time": true, op: props}
	}
	users := []any{
		set("num-ok", "$set", map[string]any{"plan": "pro", "n": json.Number("9223372036854775807"), "f": json.Number("1.5e300")}),
		set("num-big-1", "$set", map[string]any{"plan": "free", "n": json.Number("1e400")}),
		set("num-big-2", "$set_once", map[string]any{"plan": "free", "n": json.Number(twoTo64)}),
		set("num-big-3", "$union", map[string]any{"n": []any{json.Number("1"), json.Number(hundred)}}),
		set("num-ok", "$set", map[string]any{"later": "yes", "n": json.Number(hundred)}),
	}
	wantFields := map[int64]string{1: "$set.n", 2: "$set_once.n", 3: "$union.n", 4: "$set.n"}
	r := s.do(t, request{Path: "/engage", Query: q, Auth: asSecret, Header: hdr, Body: mustJSON(t, users)})
	if r.Status != http.StatusBadRequest {
		t.Fatalf("/engage: %s", r)
	}
	failed, _ := r.JSON(t)["failed_records"].([]any)
	if len(failed) != len(wantFields) {
		t.Fatalf("%d failed records, want %d: %s", len(failed), len(wantFields), r)
	}
	for _, f := range failed {
		m := f.(map[string]any)
		i := num(t, m["index"])
		if m["field"] != wantFields[i] || !strings.Contains(m["message"].(string), "number out of range") {
			t.Fatalf("failure %v, want field %s", m, wantFields[i])
		}
	}
	// Without strict, verbose answers name the first failure.
	r = s.do(t, request{Path: "/groups", Query: url.Values{"verbose": {"1"}}, Auth: asSecret, Header: hdr,
		Body: mustJSON(t, []any{map[string]any{"$group_key": "company", "$group_id": "num-co", "$set": map[string]any{"size": json.Number("-1e400")}}})})
	if msg := wantVerbose(t, r, 0); !strings.Contains(msg, "$set.size") || !strings.Contains(msg, "number out of range") {
		t.Fatalf("/groups: %s", msg)
	}

	ps := engageProfiles(t, s, mainSecret, url.Values{"distinct_ids": {`["num-ok","num-big-1","num-big-2","num-big-3"]`}})
	if len(ps) != 1 || ps["num-ok"]["plan"] != "pro" || ps["num-ok"]["later"] != nil {
		t.Fatalf("profiles %v: want num-ok alone, without the refused update", ps)
	}
	if g := engageProfiles(t, s, mainSecret, url.Values{"data_group_id": {"company"}}); len(g) != 0 {
		t.Fatalf("group profiles %v", g)
	}
	raw := string(s.do(t, request{Path: "/api/2.0/engage", Query: url.Values{"distinct_id": {"num-ok"}}, Auth: basicAuth(mainSecret, "")}).Body)
	if !strings.Contains(raw, `9223372036854775807`) || !strings.Contains(raw, `1.5e300`) || strings.Contains(raw, hundred) {
		t.Fatalf("stored profile: %s", raw)
	}
}

// POST /amplitude needs only a project token, which is public: the
// requests that make the server call out are limited per project, and a
// failing export host (here a proxy that names internal hosts) shows in
// the answer as what failed, never as a URL.
func TestEdgeAmplitudeRelay(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprint(w, "proxy: see http://10.9.8.7:8443/api/2/export for details")
	}))
	defer upstream.Close()
	t.Setenv("TRIBUTARY_AMPLITUDE_URL", upstream.URL) // the child inherits it
	s := startServer(t, defaultConfig())
	day := func(d int) string { return time.Now().UTC().AddDate(0, 0, -d).Format(time.DateOnly) }
	body := func(token string) []byte {
		return mustJSON(t, map[string]any{"SOURCE_API_KEY": "k", "SOURCE_API_SECRET": "s", "TARGET_TOKEN": token,
			"START_DATE": day(10), "END_DATE": day(5)})
	}
	upHost := strings.TrimPrefix(upstream.URL, "http://")
	for i := range 10 {
		r := s.do(t, request{Path: "/amplitude", Body: body(mainToken)})
		msg := wantError(t, r, http.StatusBadGateway, "Bad Gateway")
		if strings.Contains(msg, "10.9.8.7") || strings.Contains(msg, upHost) || strings.Contains(msg, "://") {
			t.Fatalf("request %d: the error shows a URL: %s", i, msg)
		}
	}
	mu.Lock()
	before := calls
	mu.Unlock()
	r := s.do(t, request{Path: "/amplitude", Body: body(mainToken)})
	wantError(t, r, http.StatusTooManyRequests, "Too Many Requests")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.Header)
	}
	mu.Lock()
	after := calls
	mu.Unlock()
	if after != before {
		t.Fatalf("the refused request made %d calls out", after-before)
	}
	// Another project's budget is its own.
	wantError(t, s.do(t, request{Path: "/amplitude", Body: body(tinyToken)}), http.StatusBadGateway, "Bad Gateway")
}

// Parallel lookup-table uploads wait for memory instead of all holding
// their tables at once: four at a time cost the server about what one
// does. A declared body over the size limit is refused unread.
func TestEdgeLookupUploadsShareMemory(t *testing.T) {
	t.Parallel()
	var csv bytes.Buffer
	csv.WriteString("item_id,name,price,active,updated\n")
	for i := 0; csv.Len() < 32<<20; i++ {
		fmt.Fprintf(&csv, "key-%09d,Product name %d,%d.%02d,true,2024-01-%02dT00:00:00Z\n", i, i%1000, i%500, i%100, 1+i%28)
	}
	cfg := defaultConfig()
	cfg.MemoryLimit = "256MB" // 96 MB for uploads: one at a time (lookup.UploadMemory each)
	cfg.Projects[0].LookupTables = []lookupConfig{{ID: "t1", Name: "T1", Property: "item_id"}, {ID: "t2", Name: "T2", Property: "item_id"},
		{ID: "t3", Name: "T3", Property: "item_id"}, {ID: "t4", Name: "T4", Property: "item_id"}}
	put := func(s *server, id string) reply {
		return s.do(t, request{Method: http.MethodPut, Path: "/lookup-tables/" + id, Query: projectQ(mainID), Auth: asOwner,
			Header: map[string]string{"Content-Type": "text/csv"}, Body: csv.Bytes()})
	}
	growth := func(parallel int) int64 {
		s := startServer(t, cfg)
		base, err := s.procStatus("VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Go(func() {
				if r := put(s, fmt.Sprintf("t%d", i+1)); r.Status != http.StatusOK {
					t.Errorf("upload %d: %s", i, r)
				}
			})
		}
		wg.Wait()
		peak, err := s.procStatus("VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d upload(s) of %d MiB: resident %d MiB → peak %d MiB", parallel, csv.Len()>>20, base>>10, peak>>10)
		return peak - base
	}
	one, four := growth(1), growth(4)
	if four > one*2 {
		t.Fatalf("four parallel uploads grew the server by %d MiB, one by %d MiB: they are not sharing the memory", four>>10, one>>10)
	}

	// Content-Length over 100 MB: 413 before a byte of the body is read.
	s := startServer(t, defaultConfig())
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := http.NewRequest(http.MethodPut, s.URL+"/lookup-tables/items?project_id=1", nil)
	asOwner(req)
	fmt.Fprintf(c, "PUT /lookup-tables/items?project_id=1 HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: text/csv\r\nContent-Length: %d\r\n\r\n",
		req.Header.Get("Authorization"), 200<<20)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line := make([]byte, 12)
	if _, err := io.ReadFull(c, line); err != nil || string(line) != "HTTP/1.1 413" {
		t.Fatalf("a declared 200 MB table: %q %v", line, err)
	}
}
