package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/lookup"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// Query API tests run the real handler over loopback HTTP against the
// real embedded store in a temporary directory.

const (
	qSimple   = 1 // Simplified ID Merge, with lookup tables
	qOriginal = 2 // Original ID Merge
	qSecret1  = "query-secret-1"
	qSecret2  = "query-secret-2"
	qAnalyst  = "query-analyst"
	qAnalystS = "query-analyst-secret"
)

type queryEnv struct {
	t   *testing.T
	st  *duckstore.Store
	srv *Server
	url string
}

func newQueryEnv(t *testing.T) *queryEnv {
	t.Helper()
	ctx := context.Background()
	st, err := duckstore.Open(ctx, filepath.Join(t.TempDir(), "data", "tributary.duckdb"), duckstore.Options{MemoryLimit: "256MB", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg := &config.Config{Region: config.RegionUS, Projects: []config.Project{
		{ID: qSimple, Name: "q", Token: "query-token-1", APISecret: qSecret1, Region: config.RegionUS, IDManagement: config.IDSimplified,
			ServiceAccounts: []config.ServiceAccount{{Username: qAnalyst, Secret: qAnalystS, Role: config.RoleAnalyst}},
			LookupTables: []config.LookupTable{
				{ID: "items", Name: "Items", Property: "item_id", MapsTo: "event"},
				{ID: "plans", Name: "Plans", Property: "plan", MapsTo: "user"},
				{ID: "never-uploaded", Name: "Empty", Property: "sku"},
			}},
		{ID: qOriginal, Name: "o", Token: "query-token-2", APISecret: qSecret2, Region: config.RegionUS, IDManagement: config.IDOriginal},
	}}
	if err := st.SetMode(ctx, qSimple, identity.Simplified); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMode(ctx, qOriginal, identity.Original); err != nil {
		t.Fatal(err)
	}
	srv := New(Deps{Config: cfg, Store: st, Auth: auth.New(cfg, nil)})
	// Handler() does not list the query routes until server.go calls
	// queryRoutes; route them here in front of it either way.
	mux := http.NewServeMux()
	srv.queryRoutes(func(pattern, name string, h http.HandlerFunc) { mux.Handle(pattern, srv.instrument(name, h)) })
	mux.Handle("/", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return &queryEnv{t: t, st: st, srv: srv, url: hs.URL}
}

func (e *queryEnv) write(b store.Batch) store.WriteResult {
	e.t.Helper()
	res, err := e.st.Write(context.Background(), []store.Batch{b})
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// setProfile $sets props on a user (groupKey "") or group profile.
func (e *queryEnv) setProfile(project int64, groupKey, id, props string) {
	e.t.Helper()
	e.write(store.Batch{Project: project, Profiles: []store.ProfileUpdate{e.profileUpdate(groupKey, id, props)}})
}

func (e *queryEnv) profileUpdate(groupKey, id, props string) store.ProfileUpdate {
	e.t.Helper()
	var (
		u   profile.Update
		err error
	)
	if groupKey == "" {
		u, err = profile.ParseUser([]byte(fmt.Sprintf(`{"$token":"t","$distinct_id":%q,"$set":%s}`, id, props)))
	} else {
		u, err = profile.ParseGroup([]byte(fmt.Sprintf(`{"$token":"t","$group_key":%q,"$group_id":%q,"$set":%s}`, groupKey, id, props)))
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return store.ProfileUpdate{Update: u}
}

func (e *queryEnv) lookupTable(project int64, id, csv string) {
	e.t.Helper()
	tab, err := lookup.Parse(strings.NewReader(csv), lookup.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.ReplaceLookup(context.Background(), project, id, tab.Batches()); err != nil {
		e.t.Fatal(err)
	}
	e.srv.enrich.Invalidate(project, id) // what the upload handler does
}

type queryReply struct {
	Status int
	Header http.Header
	Body   []byte
	URL    string
	Method string
}

func (r queryReply) decode(t *testing.T, v any) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%s %s: HTTP %d %s", r.Method, r.URL, r.Status, r.Body)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v\n%s", r.URL, err, r.Body)
	}
}

// call sends q in the query string (GET) or as a form body (POST), with
// Basic credentials (a project secret has an empty password).
func (e *queryEnv) call(method, path string, q url.Values, user, pass string) queryReply {
	e.t.Helper()
	u := e.url + path
	var body io.Reader
	if method == http.MethodGet {
		u += "?" + q.Encode()
	} else {
		body = strings.NewReader(q.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return queryReply{Status: resp.StatusCode, Header: resp.Header, Body: b, URL: u, Method: method}
}
