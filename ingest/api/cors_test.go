package api

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/config"
)

func TestCORSHeaders(t *testing.T) {
	open := []config.Project{{ID: 1}, {ID: 2, CORSAllowedOrigins: []string{"https://shop.example"}}}
	closed := []config.Project{{ID: 2, CORSAllowedOrigins: []string{"https://shop.example"}}, {ID: 3, CORSAllowedOrigins: []string{}}}
	tests := []struct {
		name     string
		projects []config.Project
		method   string
		hdr      map[string]string
		called   bool
		want     map[string]string // "" value: header absent
	}{
		{"credentialed POST, any origin", open, http.MethodPost, map[string]string{"Origin": "https://a.example"}, true,
			map[string]string{"Access-Control-Allow-Origin": "https://a.example", "Access-Control-Allow-Credentials": "true",
				"Access-Control-Allow-Methods": ""}},
		{"no Origin: not a browser's cross-origin request", open, http.MethodPost, nil, true,
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": ""}},
		{"preflight for a JSON body", open, http.MethodOptions,
			map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}, false,
			map[string]string{"Access-Control-Allow-Origin": "https://a.example", "Access-Control-Allow-Credentials": "true",
				"Access-Control-Allow-Methods": "GET, POST, OPTIONS", "Access-Control-Allow-Headers": corsDefaultHeaders, "Access-Control-Max-Age": "86400"}},
		{"preflight never allows credentials headers", open, http.MethodOptions,
			map[string]string{"Origin": "https://a.example", "Access-Control-Request-Headers": "Content-Type, X-Custom, Authorization, Cookie, bad header"}, false,
			map[string]string{"Access-Control-Allow-Headers": corsDefaultHeaders + ", X-Custom"}},
		{"preflight asking for nothing", open, http.MethodOptions, map[string]string{"Origin": "https://a.example"}, false,
			map[string]string{"Access-Control-Allow-Headers": corsDefaultHeaders, "Access-Control-Allow-Private-Network": ""}},
		{"preflight from a public page to a private network", open, http.MethodOptions,
			map[string]string{"Origin": "https://a.example", "Access-Control-Request-Private-Network": "true"}, false,
			map[string]string{"Access-Control-Allow-Private-Network": "true"}},
		{"every project lists origins: a listed one", closed, http.MethodOptions, map[string]string{"Origin": "https://SHOP.example"}, false,
			map[string]string{"Access-Control-Allow-Origin": "https://SHOP.example", "Access-Control-Allow-Methods": "GET, POST, OPTIONS"}},
		{"every project lists origins: another one", closed, http.MethodOptions, map[string]string{"Origin": "https://evil.example"}, false,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": "", "Access-Control-Allow-Methods": ""}},
		{"every project lists origins: POST from another one", closed, http.MethodPost, map[string]string{"Origin": "https://evil.example"}, true,
			map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{corsPolicy: newCORSPolicy(tc.projects)}
			called := false
			h := s.cors(func(w http.ResponseWriter, r *http.Request) { called = true })
			r := httptest.NewRequest(tc.method, "/track", nil)
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h(w, r)
			if called != tc.called {
				t.Errorf("handler called %v, want %v", called, tc.called)
			}
			if !tc.called && w.Code != http.StatusOK {
				t.Errorf("preflight answered %d", w.Code)
			}
			for k, v := range tc.want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !slices.Contains(w.Header().Values("Vary"), "Origin") {
				t.Errorf("Vary %q lacks Origin", w.Header().Values("Vary"))
			}
		})
	}
}

// TestCORSOnlyOnTokenEndpoints: the token endpoints answer browsers, with
// and without the trailing slash; endpoints that take a secret or a
// service account never carry a CORS header, even to a preflight.
func TestCORSOnlyOnTokenEndpoints(t *testing.T) {
	e := newIngestEnv(t)
	origin := map[string]string{"Origin": "https://a.example", "Access-Control-Request-Method": "POST"}
	for _, path := range []string{"/track", "/track/", "/engage", "/engage/", "/groups", "/groups/"} {
		r := e.do(http.MethodOptions, path, origin, "")
		if r.Status != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "https://a.example" ||
			r.Header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("OPTIONS %s: %d %v", path, r.Status, r.Header)
		}
	}
	for _, path := range []string{"/import", "/import/", "/api/2.0/export", "/api/2.0/engage", "/api/query/segmentation",
		"/lookup-tables", "/lookup-tables/items", "/oauth/token", "/metrics", "/healthz", "/nope"} {
		for _, m := range []string{http.MethodOptions, http.MethodGet, http.MethodPost} {
			hdr := map[string]string{"Origin": "https://a.example", "basic": iSecS + ":"}
			r := e.do(m, path, hdr, "")
			for k := range r.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("%s %s answered %s: %v", m, path, k, r.Header[k])
				}
			}
		}
	}
}
