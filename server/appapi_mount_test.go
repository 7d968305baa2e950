package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/ingest/api"
	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/commit"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/internal/metrics"
	"github.com/tributary-dev/tributary/scheduler/appapi"
	"github.com/tributary-dev/tributary/server"
)

// The app API mounts on the ingest API's mux: its routes answer with the
// ingest API's authorization and error shapes, unknown routes still get
// the ingest API's 404, and requests count in the same metric under the
// app route names. Real embedded store, real scheduler, loopback HTTP.

const (
	metricsToken = "scrape-token"
	owner        = "owner:owner-secret"
	analyst      = "analyst:analyst-secret"
)

func newMounted(t *testing.T, withScheduler bool) string {
	t.Helper()
	ctx := context.Background()
	st, err := duckstore.Open(ctx, filepath.Join(t.TempDir(), "tributary.duckdb"), duckstore.Options{MemoryLimit: "256MB", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Region: config.RegionUS, MetricsToken: metricsToken, Projects: []config.Project{
		{ID: 1, Name: "p", Token: "tok", APISecret: "sec", Region: config.RegionUS, IDManagement: config.IDSimplified,
			RateLimit: &config.RateLimit{BytesPerMinute: 1 << 30},
			ServiceAccounts: []config.ServiceAccount{
				{Username: "owner", Secret: "owner-secret", Role: config.RoleOwner},
				{Username: "analyst", Secret: "analyst-secret", Role: config.RoleAnalyst},
			}},
	}}
	reg := metrics.New()
	c := commit.New(st, commit.Options{})
	ingest := api.New(api.Deps{Config: cfg, Store: st, Committer: c, Auth: auth.New(cfg, nil), Metrics: reg})
	d := appapi.Deps{Auth: ingest, Store: st}
	if withScheduler {
		sched, err := server.NewScheduler(ctx, cfg, nil, st, nil, reg)
		if err != nil {
			t.Fatal(err)
		}
		d.Scheduler = sched
	}
	hs := httptest.NewServer(ingest.Handler(appapi.New(d).Routes))
	t.Cleanup(func() {
		hs.Close()
		_ = c.Close()
		_ = st.Close()
	})
	return hs.URL
}

func do(t *testing.T, method, url, basic string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user, pass, ok := strings.Cut(basic, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, strings.TrimSpace(string(b))
}

func TestMountedRoutes(t *testing.T) {
	base := newMounted(t, true)
	const imports = "/api/app/projects/1/warehouse-sources/imports"
	for _, tc := range []struct {
		name, method, path, basic string
		code                      int
		body                      string
	}{
		{"list", "GET", imports, owner, 200, `{"results":[],"status":"ok"}`},
		{"no credentials", "GET", imports, "", 401, `"status":"error"}`},
		{"analyst writes", "PUT", imports + "/x/manual-sync", analyst, 403,
			`{"error":"service account \"analyst\" has role analyst in project 1; this needs owner or admin","status":"error"}`},
		{"bad project", "GET", "/api/app/projects/zero/warehouse-sources/imports", owner, 404,
			`{"error":"no project \"zero\": project ids are positive integers","status":"error"}`},
		{"no such import", "GET", imports + "/nope", owner, 404, `{"error":"no import \"nope\" in project 1","status":"error"}`},
		{"analyst previews (a read)", "GET", imports + "/nope/preview", analyst, 404, `{"error":"no import \"nope\" in project 1","status":"error"}`},
		{"analyst lists connections", "GET", "/api/app/projects/1/warehouse-sources/connections", analyst, 200, `"status":"ok"}`},
		{"unknown route", "GET", "/api/app/projects/1/nothing", owner, 404,
			`{"code":404,"error":"no such endpoint: GET /api/app/projects/1/nothing","status":"Not Found"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, hdr, body := do(t, tc.method, base+tc.path, tc.basic)
			if code != tc.code || !strings.HasSuffix(body, tc.body) {
				t.Fatalf("%s %s: HTTP %d %s; want %d …%s", tc.method, tc.path, code, body, tc.code, tc.body)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+metricsToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, want := range []string{
		`tributary_http_requests_total{code="200",route="app_imports"} 1`,
		`tributary_http_requests_total{code="403",route="app_manual_sync"} 1`,
		`tributary_http_requests_total{code="404",route="not_found"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// Without a scheduler the routes still authorize, then answer 503.
func TestMountedWithoutScheduler(t *testing.T) {
	base := newMounted(t, false)
	code, _, body := do(t, "GET", base+"/api/app/projects/1/warehouse-sources/imports", owner)
	if want := `{"error":"warehouse imports are not enabled on this server","status":"error"}`; code != 503 || body != want {
		t.Fatalf("HTTP %d %s; want 503 %s", code, body, want)
	}
	if code, _, _ := do(t, "GET", base+"/api/app/projects/1/warehouse-sources/imports", ""); code != 401 {
		t.Fatalf("no credentials: HTTP %d; want 401 before the 503", code)
	}
}

// TestCrossSiteWriteRefused: a page of another site can make a browser
// re-send Basic credentials it once used here, in a form POST with a
// text/plain body that needs no preflight. The app API's writes refuse
// such requests before reading them; its reads and server-side clients
// are unaffected.
func TestCrossSiteWriteRefused(t *testing.T) {
	base := newMounted(t, true)
	const imports = "/api/app/projects/1/warehouse-sources/imports"
	send := func(method, path, origin string) (int, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(`{"warehouse_source_id":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("owner", "owner-secret")
		req.Header.Set("Content-Type", "text/plain")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := send("POST", imports+"/event-stream", "https://evil.example"); code != 403 || !strings.Contains(body, "not taken from a browser on another site") {
		t.Errorf("cross-site create: %d %s, want 403", code, body)
	}
	if code, body := send("PUT", imports+"/x/manual-sync", "https://evil.example"); code != 403 {
		t.Errorf("cross-site manual sync: %d %s, want 403", code, body)
	}
	if code, body := send("GET", imports, "https://evil.example"); code != 200 {
		t.Errorf("cross-site read: %d %s, want 200 (a read's answer is not readable cross-site)", code, body)
	}
	// A server-side client reaches the handler, which refuses the unknown
	// connection on its merits.
	if code, body := send("POST", imports+"/event-stream", ""); code != 400 {
		t.Errorf("server-side create: %d %s, want 400 naming the connection", code, body)
	}
}
