package console

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/internal/config"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestConsole(t *testing.T) (*Console, *clock, http.Handler) {
	t.Helper()
	cfg := &config.Config{Region: config.RegionUS, Projects: []config.Project{
		{ID: 1, Name: "One", Region: config.RegionUS, ServiceAccounts: []config.ServiceAccount{{Username: "sa", Secret: "right-secret", Role: config.RoleOwner}}},
		{ID: 2, Name: "EU", Region: "eu", ServiceAccounts: []config.ServiceAccount{{Username: "sa", Secret: "right-secret", Role: config.RoleOwner}}},
	}}
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	a := auth.New(cfg, clk.now)
	c := New(Options{Accounts: a, TTL: time.Hour, Secure: true, Region: "us", Now: clk.now})
	a.SetSessions(c.Session)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="tributary"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	return c, clk, c.Wrap(api)
}

func signIn(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/console/session", strings.NewReader(body)))
	return rec
}

func TestSignInCookieCSRFAndExpiry(t *testing.T) {
	c, clk, h := newTestConsole(t)
	if rec := signIn(t, h, `{"username":"sa","secret":"wrong"}`); rec.Code != 401 || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("wrong secret: %d, cookies %v", rec.Code, rec.Result().Cookies())
	}
	rec := signIn(t, h, `{"username":"sa","secret":"right-secret"}`)
	if rec.Code != 200 {
		t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	ck := rec.Result().Cookies()[0]
	if ck.Name != CookieName || !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || len(ck.Value) < 43 {
		t.Fatalf("cookie %+v", ck)
	}
	if !strings.Contains(rec.Body.String(), `"id":1`) || strings.Contains(rec.Body.String(), `"id":2`) {
		t.Errorf("projects: want only the US project: %s", rec.Body)
	}
	csrf := between(rec.Body.String(), `"csrf_token":"`, `"`)

	req := func(method, token string) *http.Request {
		r := httptest.NewRequest(method, "/api/app/projects/1/x", nil)
		r.AddCookie(ck)
		if token != "" {
			r.Header.Set(CSRFHeader, token)
		}
		return r
	}
	if acc, err := c.Session(req("GET", "")); err != nil || acc != "sa" {
		t.Fatalf("GET: %q %v", acc, err)
	}
	if _, err := c.Session(req("PATCH", "")); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("PATCH without token: %v", err)
	}
	if _, err := c.Session(req("PATCH", csrf+"x")); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("PATCH with a wrong token: %v", err)
	}
	if acc, err := c.Session(req("PATCH", csrf)); err != nil || acc != "sa" {
		t.Errorf("PATCH with the token: %q %v", acc, err)
	}
	// A 401 for the console carries no Basic challenge (no password dialog).
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req("GET", ""))
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("console 401: %d challenge %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	clk.add(time.Hour)
	if _, err := c.Session(req("GET", "")); !errors.Is(err, auth.ErrUnauthorized) {
		t.Errorf("after the TTL: %v", err)
	}
}

func TestSignOutEndsTheSessionOnTheServer(t *testing.T) {
	c, _, h := newTestConsole(t)
	rec := signIn(t, h, `{"username":"sa","secret":"right-secret"}`)
	ck := rec.Result().Cookies()[0]
	csrf := between(rec.Body.String(), `"csrf_token":"`, `"`)
	out := func(token string) int {
		r := httptest.NewRequest("DELETE", "/console/session", nil)
		r.AddCookie(ck)
		r.Header.Set(CSRFHeader, token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := out("forged"); code != 403 {
		t.Fatalf("sign-out without the token: %d", code)
	}
	if code := out(csrf); code != 200 {
		t.Fatalf("sign-out: %d", code)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.AddCookie(ck)
	if _, err := c.Session(r); !errors.Is(err, auth.ErrUnauthorized) {
		t.Errorf("the cookie still works after sign-out: %v", err)
	}
}

func TestCrossSiteSignInRefused(t *testing.T) {
	_, _, h := newTestConsole(t)
	r := httptest.NewRequest("POST", "/console/session", strings.NewReader(`{"username":"sa","secret":"right-secret"}`))
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 403 || len(w.Result().Cookies()) != 0 {
		t.Fatalf("cross-site sign-in: %d", w.Code)
	}
}

func TestPageServedWithCSP(t *testing.T) {
	_, _, h := newTestConsole(t)
	for _, path := range []string{"/", "/console/app.js", "/console/style.css"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 200 || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: %d CSP %q", path, w.Code, w.Header().Get("Content-Security-Policy"))
		}
	}
}

func TestNoDirectoryListing(t *testing.T) {
	_, _, h := newTestConsole(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/console/", nil))
	if w.Code != 404 {
		t.Errorf("GET /console/: %d %s", w.Code, w.Body)
	}
}

func between(s, a, b string) string {
	_, rest, _ := strings.Cut(s, a)
	v, _, _ := strings.Cut(rest, b)
	return v
}
