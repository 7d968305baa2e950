package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/internal/config"
)

func testConfig() *config.Config {
	return &config.Config{
		OAuthTTL: config.Duration(time.Hour),
		Projects: []config.Project{
			{ID: 1, Token: "tok-one-1", APISecret: "sec-one-1", ServiceAccounts: []config.ServiceAccount{
				{Username: "multi", Secret: "multi-secret", Role: config.RoleOwner},
				{Username: "solo", Secret: "solo-secret", Role: config.RoleAnalyst},
			}},
			{ID: 2, Token: "tok-two-2", APISecret: "sec-two-2", ServiceAccounts: []config.ServiceAccount{
				{Username: "multi", Secret: "multi-secret", Role: config.RoleConsumer},
			}},
		},
	}
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestRequest(t *testing.T) {
	a := New(testConfig(), nil)
	all := Allowed{Secret: true, Token: true, ServiceAccount: true, OAuth: true}
	cases := []struct {
		name, authz, query string
		allow              Allowed
		wantProject        int64
		wantMethod         Method
		wantRole           config.Role
		wantErr            string
	}{
		{"secret", basic("sec-one-1", ""), "", all, 1, ProjectSecret, config.RoleOwner, ""},
		{"secret plain text", "Basic sec-two-2:", "", all, 2, ProjectSecret, config.RoleOwner, ""},
		{"token", basic("tok-two-2", ""), "", all, 2, ProjectToken, config.RoleOwner, ""},
		{"token with its project_id", basic("tok-two-2", ""), "project_id=2", all, 2, ProjectToken, config.RoleOwner, ""},
		{"token with another project_id", basic("tok-two-2", ""), "project_id=1", all, 0, 0, "", "does not belong to project 1"},
		{"token not allowed", basic("tok-two-2", ""), "", Allowed{Secret: true, ServiceAccount: true}, 0, 0, "", "invalid credentials"},
		{"sa multi project", basic("multi", "multi-secret"), "project_id=2", all, 2, ServiceAccount, config.RoleConsumer, ""},
		{"sa needs project_id", basic("multi", "multi-secret"), "", all, 0, 0, "", "project_id is required"},
		{"sa single project infers it", basic("solo", "solo-secret"), "", all, 1, ServiceAccount, config.RoleAnalyst, ""},
		{"sa not member", basic("solo", "solo-secret"), "project_id=2", all, 0, 0, "", "not a member of project 2"},
		{"sa wrong secret", basic("multi", "nope"), "project_id=1", all, 0, 0, "", "invalid service account credentials"},
		{"sa unknown", basic("ghost", "multi-secret"), "project_id=1", all, 0, 0, "", "invalid service account credentials"},
		{"bad project_id", basic("multi", "multi-secret"), "project_id=abc", all, 0, 0, "", "positive integer"},
		{"missing header", "", "", all, 0, 0, "", "missing Authorization"},
		{"wrong secret", basic("sec-nope", ""), "", all, 0, 0, "", "invalid credentials"},
		{"bad bearer", "Bearer trb_nope", "", all, 0, 0, "", "invalid or expired"},
		{"scheme", "Digest x", "", all, 0, 0, "", "unsupported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/import?"+tc.query, nil)
			if tc.authz != "" {
				r.Header.Set("Authorization", tc.authz)
			}
			p, err := a.Request(r, tc.allow)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrUnauthorized containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Project.ID != tc.wantProject || p.Method != tc.wantMethod || p.Role != tc.wantRole {
				t.Fatalf("got project %d method %v role %s", p.Project.ID, p.Method, p.Role)
			}
		})
	}
}

func TestOAuthFlow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := New(testConfig(), func() time.Time { return now })
	post := func(form url.Values, user, pass string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		w := httptest.NewRecorder()
		a.ServeToken(w, r)
		return w
	}
	if w := post(url.Values{"grant_type": {"password"}}, "", ""); w.Code != 400 || !strings.Contains(w.Body.String(), "unsupported_grant_type") {
		t.Fatalf("grant type: %d %s", w.Code, w.Body)
	}
	if w := post(url.Values{"grant_type": {"client_credentials"}, "client_id": {"multi"}, "client_secret": {"bad"}}, "", ""); w.Code != 401 || !strings.Contains(w.Body.String(), "invalid_client") {
		t.Fatalf("bad secret: %d %s", w.Code, w.Body)
	}
	w := post(url.Values{"grant_type": {"client_credentials"}}, "multi", "multi-secret")
	if w.Code != 200 {
		t.Fatalf("token: %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	i := strings.Index(body, `"access_token":"`)
	tok := body[i+len(`"access_token":"`):]
	tok = tok[:strings.IndexByte(tok, '"')]
	if !strings.Contains(body, `"expires_in":3600`) || !strings.Contains(body, `"token_type":"Bearer"`) {
		t.Fatalf("token body %s", body)
	}
	req := func(q string) (Principal, error) {
		r := httptest.NewRequest("POST", "/import?"+q, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return a.Request(r, Allowed{OAuth: true})
	}
	p, err := req("project_id=1")
	if err != nil || p.Project.ID != 1 || p.Method != OAuthBearer || p.Account != "multi" || !p.CanWrite() {
		t.Fatalf("bearer: %+v %v", p, err)
	}
	if p, err := req("project_id=2"); err != nil || p.CanWrite() {
		t.Fatalf("consumer role in project 2 must not write: %+v %v", p, err)
	}
	if _, err := req(""); err == nil {
		t.Fatal("a multi-project token needs project_id")
	}
	now = now.Add(time.Hour)
	if _, err := req("project_id=1"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired token accepted: %v", err)
	}
	if r := httptest.NewRequest("GET", "/oauth/token", nil); true {
		w := httptest.NewRecorder()
		a.ServeToken(w, r)
		if w.Code != http.StatusMethodNotAllowed {
			t.Fatalf("GET: %d", w.Code)
		}
	}
}
