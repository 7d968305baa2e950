package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/commit"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// Ingestion tests run the real handler over loopback HTTP against the
// real embedded store and group committer, as `tributary serve` does.

const (
	iSimple     = 1 // Simplified ID Merge
	iOriginal   = 2 // Original ID Merge
	iRestricted = 3 // cors_allowed_origins: shopOrigin only
	iTokS       = "ingest-token-1"
	iSecS       = "ingest-secret-1"
	iTokO       = "ingest-token-2"
	iSecO       = "ingest-secret-2"
	iTokR       = "ingest-token-3"
	iSecR       = "ingest-secret-3"
	iOwner      = "ingest-owner"
	iOwnerS     = "ingest-owner-secret"
	iAnalyst    = "ingest-analyst"
	iAnalystS   = "ingest-analyst-secret"
	shopOrigin  = "https://shop.example"
)

type ingestEnv struct {
	t   *testing.T
	url string
}

func newIngestEnv(t *testing.T) *ingestEnv {
	t.Helper()
	ctx := context.Background()
	st, err := duckstore.Open(ctx, filepath.Join(t.TempDir(), "data", "tributary.duckdb"), duckstore.Options{MemoryLimit: "256MB", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Region: config.RegionUS, Projects: []config.Project{
		{ID: iSimple, Name: "s", Token: iTokS, APISecret: iSecS, Region: config.RegionUS, IDManagement: config.IDSimplified,
			ServiceAccounts: []config.ServiceAccount{
				{Username: iOwner, Secret: iOwnerS, Role: config.RoleOwner},
				{Username: iAnalyst, Secret: iAnalystS, Role: config.RoleAnalyst},
			}},
		{ID: iOriginal, Name: "o", Token: iTokO, APISecret: iSecO, Region: config.RegionUS, IDManagement: config.IDOriginal},
		{ID: iRestricted, Name: "r", Token: iTokR, APISecret: iSecR, Region: config.RegionUS, IDManagement: config.IDSimplified,
			CORSAllowedOrigins: []string{shopOrigin}},
	}}
	for i := range cfg.Projects {
		p := &cfg.Projects[i]
		p.RateLimit = &config.RateLimit{BytesPerMinute: 1 << 30} // Parse's default
		if err := st.SetMode(ctx, p.ID, p.IDMode()); err != nil {
			t.Fatal(err)
		}
	}
	c := commit.New(st, commit.Options{})
	srv := New(Deps{Config: cfg, Store: st, Committer: c, Auth: auth.New(cfg, nil)})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = c.Close()
		_ = st.Close()
	})
	return &ingestEnv{t: t, url: hs.URL}
}

type ingestReply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r ingestReply) String() string {
	return http.StatusText(r.Status) + " " + string(bytes.TrimSpace(r.Body))
}

// json decodes the body as one object (numbers kept exact).
func (r ingestReply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("HTTP %d: not a JSON object: %v\n%s", r.Status, err, r.Body)
	}
	return m
}

// do sends one request; hdr holds headers, "user:pass" under "basic".
func (e *ingestEnv) do(method, target string, hdr map[string]string, body string) ingestReply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, e.url+target, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "basic" {
			u, p, _ := bytes.Cut([]byte(v), []byte(":"))
			req.SetBasicAuth(string(u), string(p))
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return ingestReply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// exportNames reads a project's raw export back: event name → distinct_ids.
func (e *ingestEnv) exportNames(secret string) map[string][]string {
	e.t.Helper()
	day := time.Now().UTC()
	q := "from_date=" + day.AddDate(0, 0, -1).Format(time.DateOnly) + "&to_date=" + day.AddDate(0, 0, 1).Format(time.DateOnly)
	r := e.do(http.MethodGet, "/api/2.0/export?"+q, map[string]string{"basic": secret + ":"}, "")
	if r.Status != http.StatusOK {
		e.t.Fatalf("export: %s", r)
	}
	out := map[string][]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(r.Body), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev struct {
			Event      string `json:"event"`
			Properties struct {
				DistinctID string `json:"distinct_id"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			e.t.Fatalf("export line %s: %v", line, err)
		}
		out[ev.Event] = append(out[ev.Event], ev.Properties.DistinctID)
	}
	return out
}

// profile reads one user profile's properties back through /api/2.0/engage
// (nil: no such profile).
func (e *ingestEnv) profile(secret, distinctID string) map[string]any {
	e.t.Helper()
	r := e.do(http.MethodGet, "/api/2.0/engage?distinct_id="+url.QueryEscape(distinctID), map[string]string{"basic": secret + ":"}, "")
	var body struct {
		Results []struct {
			Props map[string]any `json:"$properties"`
		} `json:"results"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
		e.t.Fatalf("engage: %s", r)
	}
	if len(body.Results) == 0 {
		return nil
	}
	return body.Results[0].Props
}
