package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Contract tests: real responses validated with kin-openapi against the
// public OpenAPI documents, kept beside the repository (CI clones shared/
// next to it). Where the public documents and decisions.md differ, the
// decisions win: requests are not validated, because the document marks
// project_id as always required while the spec and decisions.md omit it
// with the API secret; and the 413 message is not compared with the
// document's example ("2097152 bytes"), the limit being 10 MiB.

// specDir is ../shared/reference/openapi relative to the repository root.
var specDir = filepath.Join("..", "..", "shared", "reference", "openapi")

// loadSpec loads and validates one document and points its servers at the
// test server (base is the URL prefix its paths hang off).
func loadSpec(t *testing.T, file, base string) (*openapi3.T, routers.Router) {
	t.Helper()
	path := filepath.Join(specDir, file)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("OpenAPI document %s missing (CI must check out shared/ beside the repository): %v", path, err)
		}
		t.Skipf("!!! SKIPPING OPENAPI CONTRACT TEST: %s not found. Check out shared/ beside the repository to run it. !!!", path)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", path, err)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// requireAll tightens a response schema: every documented property must be
// present, recursively. The public schemas list fields without `required`,
// so an empty {} would pass; the SDKs read every one of these fields.
func requireAll(s *openapi3.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for name, p := range s.Properties {
		s.Required = append(s.Required, name)
		requireAll(p.Value)
	}
	if s.Items != nil {
		requireAll(s.Items.Value)
	}
}

// checkResponse validates one real response against the operation's
// documented response for its status (an undocumented status fails).
func checkResponse(t *testing.T, router routers.Router, method, u string, r reply) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("no route for %s %s in the spec: %v", method, u, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 r.Status,
		Header:                 r.Header,
		Body:                   io.NopCloser(bytes.NewReader(r.Body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s → HTTP %d does not match the spec: %v\nbody: %s", method, u, r.Status, err, r.Body)
	}
}

func TestOpenAPIImportResponses(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	doc, router := loadSpec(t, "ingestion.openapi.yaml", s.URL)
	for _, resp := range doc.Paths.Value("/import").Post.Responses.Map() {
		for _, mt := range resp.Value.Content {
			requireAll(mt.Schema.Value)
		}
	}
	post := func(a authFn, q url.Values, body []byte) (string, reply) {
		u := s.URL + "/import"
		if q != nil {
			u += "?" + q.Encode()
		}
		return u, s.do(t, request{Path: "/import", Query: q, Auth: a, Body: body})
	}
	strict := url.Values{"strict": {"1"}, "project_id": {"1"}}
	tiny := basicAuth(tinySecret, "")

	bad := events("contract", 3)
	bad[1]["properties"].(map[string]any)["time"] = "soon"
	cases := []struct {
		name   string
		auth   authFn
		body   []byte
		status int
	}{
		{"200 accepted", asOwner, mustJSON(t, events("contract", 3)), 200},
		{"400 partially invalid", asOwner, mustJSON(t, bad), 400},
		{"401 bad credentials", basicAuth(ownerSA, "wrong-secret-1"), mustJSON(t, events("contract", 1)), 401},
		{"413 too many records", asOwner, mustJSON(t, events("contract", 2001)), 413},
		{"429 rate limited (first request)", tiny, mustJSON(t, events("contract", 10)), 200},
		{"429 rate limited", tiny, mustJSON(t, events("contract", 10)), 429},
	}
	for _, c := range cases {
		q := strict
		if c.status == 429 || strings.Contains(c.name, "first") {
			q = url.Values{"strict": {"1"}}
		}
		u, r := post(c.auth, q, c.body)
		if r.Status != c.status {
			t.Errorf("%s: want HTTP %d, got %s", c.name, c.status, r)
			continue
		}
		checkResponse(t, router, http.MethodPost, u, r)
	}

	// A body that is not JSON at all is refused whole with 400 and the
	// {code,error,status} fields only; the published (untightened) schema
	// allows that, so check it against a fresh copy.
	_, plain := loadSpec(t, "ingestion.openapi.yaml", s.URL)
	u, r := post(asOwner, strict, []byte("{not json"))
	if r.Status != http.StatusBadRequest {
		t.Fatalf("malformed body: want 400, got %s", r)
	}
	checkResponse(t, plain, http.MethodPost, u, r)
}

func TestOpenAPIExportLines(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	_, router := loadSpec(t, "export.openapi.yaml", s.URL+"/api/2.0")
	ing, _ := loadSpec(t, "ingestion.openapi.yaml", s.URL)

	sent := events("contract-export", 25)
	sent[3]["properties"].(map[string]any)["nested"] = map[string]any{"a": []any{1, "two", nil}}
	wantImported(t, s.importEvents(t, asSecret, nil, sent), 25)

	q := exportQuery(mainID, nil)
	u := s.URL + "/api/2.0/export?" + q.Encode()
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: q, Auth: asOwner})
	if r.Status != http.StatusOK {
		t.Fatalf("export: %s", r)
	}
	checkResponse(t, router, http.MethodGet, u, r) // text/plain JSONL

	// The export document describes a line only by example. Each line must
	// be an event the import API would accept (its request item schema:
	// event + properties with integer time, distinct_id, $insert_id, no
	// other top-level keys), plus the example's mp_processing_time_ms.
	item := ing.Paths.Value("/import").Post.RequestBody.Value.Content.Get("application/json").Schema.Value.Items.Value
	lines := bytes.Split(bytes.TrimSuffix(r.Body, []byte("\n")), []byte("\n"))
	if len(lines) != 25 {
		t.Fatalf("export: %d lines, want 25", len(lines))
	}
	for i, line := range lines {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		if err := item.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			t.Errorf("line %d does not match the event schema: %v\n%s", i+1, err, line)
		}
		props := v.(map[string]any)["properties"].(map[string]any)
		pt, ok := props["mp_processing_time_ms"].(float64)
		if !ok || pt != float64(int64(pt)) || pt < 1e12 {
			t.Errorf("line %d: mp_processing_time_ms %v is not integer milliseconds", i+1, props["mp_processing_time_ms"])
		}
		if tm := props["time"].(float64); tm >= 1e10 {
			t.Errorf("line %d: time %v is not in seconds (time_in_ms was not asked for)", i+1, tm)
		}
	}
}
