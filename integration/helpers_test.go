package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// httpClient is shared by all tests; the timeout only guards against a hung
// server, no request here should take more than a few seconds.
var httpClient = &http.Client{Timeout: 60 * time.Second}

// authFn sets a request's credentials.
type authFn func(*http.Request)

func basicAuth(user, pass string) authFn {
	return func(r *http.Request) { r.SetBasicAuth(user, pass) }
}

func bearerAuth(tok string) authFn {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func noAuth(*http.Request) {}

var (
	asOwner  = basicAuth(ownerSA, ownerSecret)
	asSecret = basicAuth(mainSecret, "")
)

// projectQ is the ?project_id= a service account needs.
func projectQ(id int64) url.Values { return url.Values{"project_id": {fmt.Sprint(id)}} }

// reply is a fully read HTTP response.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as one JSON object (numbers kept exact).
func (r reply) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("HTTP %d body is not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

func (r reply) String() string { return fmt.Sprintf("HTTP %d %s", r.Status, bytes.TrimSpace(r.Body)) }

// request is one HTTP call to a server; zero fields mean sensible defaults.
type request struct {
	Method string // POST when empty
	Path   string
	Query  url.Values
	Auth   authFn
	Header map[string]string
	Body   []byte
}

func (s *server) do(t testing.TB, rq request) reply {
	t.Helper()
	rep, err := s.try(rq)
	if err != nil {
		t.Fatalf("%s %s: %v", rq.Method, rq.Path, err)
	}
	return rep
}

// try is do without failing the test, for callers that expect errors
// (a killed server) or run outside the test goroutine.
func (s *server) try(rq request) (reply, error) {
	return doRequestWith(s.Client(), s.URL, rq)
}

func doRequestWith(client *http.Client, base string, rq request) (reply, error) {
	if rq.Method == "" {
		rq.Method = http.MethodPost
	}
	u := base + rq.Path
	if len(rq.Query) > 0 {
		u += "?" + rq.Query.Encode()
	}
	var body io.Reader
	if rq.Body != nil {
		body = bytes.NewReader(rq.Body)
	}
	req, err := http.NewRequest(rq.Method, u, body)
	if err != nil {
		return reply{}, err
	}
	if rq.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range rq.Header {
		req.Header.Set(k, v)
	}
	if rq.Auth != nil {
		rq.Auth(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// importEvents POSTs events (anything JSON-encodable) to /import.
func (s *server) importEvents(t testing.TB, a authFn, q url.Values, events any) reply {
	t.Helper()
	return s.do(t, request{Path: "/import", Query: q, Auth: a, Body: mustJSON(t, events)})
}

// wantImported asserts a strict 200 {"code":200,"num_records_imported":n,"status":"OK"}.
func wantImported(t testing.TB, r reply, n int) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("import: want 200, got %s", r)
	}
	m := r.JSON(t)
	if m["code"] != json.Number("200") || m["status"] != "OK" || m["num_records_imported"] != json.Number(fmt.Sprint(n)) {
		t.Fatalf("import: want {code:200,num_records_imported:%d,status:OK}, got %s", n, r.Body)
	}
}

// wantError asserts an error status with the {"code","error","status"} body
// and returns the error message.
func wantError(t testing.TB, r reply, status int, statusText string) string {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want HTTP %d, got %s", status, r)
	}
	m := r.JSON(t)
	msg, _ := m["error"].(string)
	if m["code"] != json.Number(fmt.Sprint(status)) || m["status"] != statusText || msg == "" {
		t.Fatalf("want {code:%d,error:…,status:%q}, got %s", status, statusText, r.Body)
	}
	return msg
}

var idSeq atomic.Int64

// uid returns a unique, valid $insert_id (≤ 36 bytes of [A-Za-z0-9-]).
func uid(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, idSeq.Add(1))
}

// event builds an import record; props may be nil.
func event(name, distinctID, insertID string, at time.Time, props map[string]any) map[string]any {
	p := map[string]any{"time": at.Unix(), "distinct_id": distinctID}
	if insertID != "" {
		p["$insert_id"] = insertID
	}
	for k, v := range props {
		p[k] = v
	}
	return map[string]any{"event": name, "properties": p}
}

// events builds n distinct events named name, an hour in the past.
func events(name string, n int) []map[string]any {
	at := time.Now().Add(-time.Hour)
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = event(name, fmt.Sprintf("user-%d", i%7), uid("e"), at.Add(time.Duration(i)*time.Second),
			map[string]any{"seq": i, "plan": "pro"})
	}
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// exported is one line of the raw export.
type exported struct {
	Event      string         `json:"event"`
	Properties map[string]any `json:"properties"`
}

func (e exported) InsertID() string { s, _ := e.Properties["$insert_id"].(string); return s }

// exportQuery is a query covering every time the tests use (from two days
// back to tomorrow, UTC) plus extra parameters.
func exportQuery(id int64, extra url.Values) url.Values {
	now := time.Now().UTC()
	q := url.Values{
		"from_date": {now.AddDate(0, 0, -2).Format(time.DateOnly)},
		"to_date":   {now.AddDate(0, 0, 1).Format(time.DateOnly)},
	}
	if id != 0 {
		q.Set("project_id", fmt.Sprint(id))
	}
	for k, v := range extra {
		q[k] = v
	}
	return q
}

// export reads the whole raw export of a project; every line must be a
// JSON object (numbers kept exact).
func (s *server) export(t testing.TB, a authFn, project int64, extra url.Values) []exported {
	t.Helper()
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(project, extra), Auth: a})
	if r.Status != http.StatusOK {
		t.Fatalf("export: want 200, got %s", r)
	}
	return parseExport(t, r.Body)
}

func parseExport(t testing.TB, body []byte) []exported {
	t.Helper()
	var out []exported
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			t.Fatalf("export line %d is empty", n)
		}
		var e exported
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("export line %d is not JSON: %v\n%s", n, err, sc.Bytes())
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// byInsertID indexes exported events, failing on a repeated $insert_id
// (every test event has a unique one, so a repeat is a dedup failure).
func byInsertID(t testing.TB, evs []exported) map[string]exported {
	t.Helper()
	m := make(map[string]exported, len(evs))
	for _, e := range evs {
		id := e.InsertID()
		if _, dup := m[id]; dup {
			t.Fatalf("export returned $insert_id %q twice", id)
		}
		m[id] = e
	}
	return m
}

// insertIDs lists the ids of sent records, sorted.
func insertIDs(evs []map[string]any) []string {
	var ids []string
	for _, e := range evs {
		ids = append(ids, e["properties"].(map[string]any)["$insert_id"].(string))
	}
	sort.Strings(ids)
	return ids
}

// exportedIDs lists the $insert_ids of exported events, sorted.
func exportedIDs(evs []exported) []string {
	ids := make([]string, 0, len(evs))
	for _, e := range evs {
		ids = append(ids, e.InsertID())
	}
	sort.Strings(ids)
	return ids
}

func sameStrings(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// num converts an exported JSON number to int64, failing on anything else.
func num(t testing.TB, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("want a JSON number, got %T %v", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("want an integer, got %s", n)
	}
	return i
}

// jsonNum is n as the json.Number a UseNumber decode produces.
func jsonNum(n int64) json.Number { return json.Number(fmt.Sprint(n)) }

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}
