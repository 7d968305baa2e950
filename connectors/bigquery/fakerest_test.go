package bigquery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tributary-dev/tributary/connectors/bigquery/bqread"
)

// restStub is a minimal BigQuery REST API (datasets.get and tables.get
// only) for tests that need no queries: the benchmark, which must not
// measure the emulator, and error classification, which needs answers
// the emulator never gives (401, 403, 503). Responses are the REST API's
// JSON shapes, decoded by the real client library.
type restStub struct {
	srv    *httptest.Server
	mu     sync.Mutex
	tables map[string]any // "dataset/table" → the table resource's "schema"
	fail   func(r *http.Request) (code int, reason string)
	// statementType, when set, answers dry-run query jobs with the
	// statement type it gives the SQL; other jobs are not served.
	statementType func(sql string) string
	jobs          int // query jobs inserted, dry runs included
}

func newRESTStub(t testing.TB) *restStub {
	s := &restStub{tables: map[string]any{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// addTable registers a table; fields are REST schema fields.
func (s *restStub) addTable(dataset, table string, fields ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tables[dataset+"/"+table] = map[string]any{"fields": fields}
}

func field(name, typ, mode string) map[string]any {
	return map[string]any{"name": name, "type": typ, "mode": mode}
}

func (s *restStub) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.fail != nil {
		if code, reason := s.fail(r); code != 0 {
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"code": code, "message": "stub says " + reason,
				"errors": []any{map[string]any{"reason": reason, "message": "stub says " + reason}}}})
			return
		}
	}
	// /bigquery/v2/projects/{p}/datasets/{d}[/tables/{t}]
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/bigquery/v2/"), "/")
	switch {
	case r.Method == http.MethodGet && len(parts) == 4 && parts[2] == "datasets":
		json.NewEncoder(w).Encode(map[string]any{"id": parts[1] + ":" + parts[3],
			"datasetReference": map[string]any{"projectId": parts[1], "datasetId": parts[3]}})
		return
	case r.Method == http.MethodPost && len(parts) == 3 && parts[2] == "jobs" && s.statementType != nil:
		var job struct {
			JobReference  map[string]any `json:"jobReference"`
			Configuration struct {
				DryRun bool `json:"dryRun"`
				Query  struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"configuration"`
		}
		json.NewDecoder(r.Body).Decode(&job)
		s.mu.Lock()
		s.jobs++
		s.mu.Unlock()
		if !job.Configuration.DryRun {
			break // a job that would run: the stub runs nothing
		}
		json.NewEncoder(w).Encode(map[string]any{"jobReference": job.JobReference,
			"configuration": map[string]any{"dryRun": true, "query": map[string]any{"query": job.Configuration.Query.Query}},
			"status":        map[string]any{"state": "DONE"},
			"statistics": map[string]any{"query": map[string]any{"statementType": s.statementType(job.Configuration.Query.Query),
				"schema": map[string]any{"fields": []any{field("x", "INTEGER", "NULLABLE")}}}}})
		return
	case r.Method == http.MethodGet && len(parts) == 6 && parts[4] == "tables":
		s.mu.Lock()
		schema, ok := s.tables[parts[3]+"/"+parts[5]]
		s.mu.Unlock()
		if ok {
			json.NewEncoder(w).Encode(map[string]any{"type": "TABLE", "schema": schema,
				"tableReference": map[string]any{"projectId": parts[1], "datasetId": parts[3], "tableId": parts[5]}})
			return
		}
	}
	w.WriteHeader(http.StatusNotFound)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 404, "message": "Not found: " + r.URL.Path,
		"errors": []any{map[string]any{"reason": "notFound", "message": "Not found"}}}})
}

// stubEnv is a REST stub plus a Storage Read server, without the emulator.
type stubEnv struct {
	rest *restStub
	srv  *bqread.Server
}

func newStubEnv(t testing.TB) *stubEnv {
	srv, err := bqread.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return &stubEnv{rest: newRESTStub(t), srv: srv}
}

// series registers dataset.name as the conformance series in both.
func (e *stubEnv) series(t testing.TB, dataset, name string, n int64) {
	e.rest.addTable(dataset, name, field("id", "INTEGER", "REQUIRED"), field("ts", "TIMESTAMP", "REQUIRED"),
		field("name", "STRING", "NULLABLE"), field("amount", "FLOAT", "NULLABLE"))
	seriesInDuckDB(t, e.srv, dataset, name, n)
}

func (e *stubEnv) open(t testing.TB, extra map[string]string) (*Source, error) {
	f := map[string]string{"project": "p", "dataset": "d", "endpoint": e.rest.srv.URL, "storage_endpoint": e.srv.Endpoint()}
	for k, v := range extra {
		f[k] = v
	}
	src, err := Open(context.Background(), f)
	if err == nil {
		t.Cleanup(func() { src.Close() })
	}
	return src, err
}
