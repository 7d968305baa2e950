package integration

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// OAuth 2.0 client-credentials tokens for service accounts (decisions.md),
// used as Bearer credentials on /import and export.

type tokenReply struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

func oauthForm(user, secret string) []byte {
	return []byte(url.Values{"grant_type": {"client_credentials"}, "client_id": {user}, "client_secret": {secret}}.Encode())
}

var formHeader = map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

func (s *server) token(t *testing.T, user, secret string) tokenReply {
	t.Helper()
	r := s.do(t, request{Path: "/oauth/token", Header: formHeader, Body: oauthForm(user, secret)})
	var tr tokenReply
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &tr) != nil || tr.AccessToken == "" || tr.TokenType != "Bearer" {
		t.Fatalf("token for %s: want 200 with a Bearer access_token, got %s", user, r)
	}
	return tr
}

func TestOAuthTokenFlow(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	tr := s.token(t, ownerSA, ownerSecret)
	if tr.ExpiresIn != 3600 {
		t.Errorf("expires_in %d, want 3600 (the default oauth_token_ttl of 1h)", tr.ExpiresIn)
	}
	bearer := bearerAuth(tr.AccessToken)
	batch := events("oauth", 20)
	wantImported(t, s.importEvents(t, bearer, projectQ(mainID), batch), 20)
	// A single-project account's token works without project_id, as its Basic credentials do.
	wantImported(t, s.importEvents(t, bearer, nil, events("oauth", 1)), 1)
	got := s.export(t, bearer, mainID, url.Values{"event": {`["oauth"]`}})
	if len(got) != 21 {
		t.Fatalf("export with the bearer token: %d events, want 21", len(got))
	}
	ids := byInsertID(t, got)
	for _, id := range insertIDs(batch) {
		if _, ok := ids[id]; !ok {
			t.Fatalf("event %s missing", id)
		}
	}

	// The token is scoped to the account's projects and role.
	wantError(t, s.importEvents(t, bearer, projectQ(otherID), batch), http.StatusUnauthorized, "Unauthorized")
	analyst := bearerAuth(s.token(t, analystSA, analystSec).AccessToken)
	wantError(t, s.importEvents(t, analyst, projectQ(mainID), batch), http.StatusForbidden, "Forbidden")
	multi := bearerAuth(s.token(t, multiSA, multiSecret).AccessToken)
	msg := wantError(t, s.importEvents(t, multi, nil, batch), http.StatusUnauthorized, "Unauthorized")
	if !strings.Contains(msg, "project_id") {
		t.Errorf("multi-project token without project_id: %q", msg)
	}
	wantImported(t, s.importEvents(t, multi, projectQ(otherID), events("oauth-other", 2)), 2)

	// Client credentials may also come as HTTP Basic (RFC 6749 §2.3.1).
	r := s.do(t, request{Path: "/oauth/token", Header: formHeader, Auth: basicAuth(ownerSA, ownerSecret),
		Body: []byte("grant_type=client_credentials")})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "access_token") {
		t.Errorf("token with Basic client credentials: %s", r)
	}

	for _, c := range []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"wrong secret", oauthForm(ownerSA, "wrong-secret-1"), http.StatusUnauthorized, "invalid_client"},
		{"unknown client", oauthForm("nobody", "some-secret-1"), http.StatusUnauthorized, "invalid_client"},
		{"empty secret", oauthForm(ownerSA, ""), http.StatusUnauthorized, "invalid_client"},
		{"password grant", []byte("grant_type=password&username=a&password=b"), http.StatusBadRequest, "unsupported_grant_type"},
	} {
		r := s.do(t, request{Path: "/oauth/token", Header: formHeader, Body: c.body})
		var e map[string]string
		if r.Status != c.status || json.Unmarshal(r.Body, &e) != nil || e["error"] != c.code {
			t.Errorf("token, %s: want %d {error:%s}, got %s", c.name, c.status, c.code, r)
		}
	}
	if r := s.do(t, request{Method: http.MethodGet, Path: "/oauth/token"}); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET /oauth/token: want 405, got %s", r)
	}
	wantError(t, s.importEvents(t, bearerAuth(tr.AccessToken+"x"), projectQ(mainID), batch), http.StatusUnauthorized, "Unauthorized")
}

// TestOAuthTokenExpiry waits out the shortest TTL the config allows (1m);
// it runs in parallel with the other tests, so it costs little wall time.
func TestOAuthTokenExpiry(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.OAuthTTL = "1m"
	s := startServer(t, cfg)
	tr := s.token(t, ownerSA, ownerSecret)
	issued := time.Now()
	if tr.ExpiresIn != 60 {
		t.Fatalf("expires_in %d, want 60", tr.ExpiresIn)
	}
	bearer := bearerAuth(tr.AccessToken)
	wantImported(t, s.importEvents(t, bearer, projectQ(mainID), events("before-expiry", 3)), 3)
	time.Sleep(time.Until(issued.Add(61 * time.Second)))
	msg := wantError(t, s.importEvents(t, bearer, projectQ(mainID), events("after-expiry", 3)), http.StatusUnauthorized, "Unauthorized")
	if !strings.Contains(msg, "expired") {
		t.Errorf("expired token: message %q does not say so", msg)
	}
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(mainID, nil), Auth: bearer})
	wantError(t, r, http.StatusUnauthorized, "Unauthorized")
	got := s.export(t, asOwner, mainID, nil)
	if len(got) != 3 || got[0].Event != "before-expiry" {
		t.Fatalf("export: %d events, want the 3 sent before expiry", len(got))
	}
}
