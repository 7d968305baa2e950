package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A session stands for its service account only where an endpoint allows
// Session; an Authorization header always wins over it.
func TestSessions(t *testing.T) {
	a := New(testConfig(), nil)
	a.SetSessions(func(r *http.Request) (string, error) {
		switch r.Header.Get("X-Test-Session") {
		case "multi":
			return "multi", nil
		case "expired":
			return "", fmt.Errorf("%w: expired", ErrUnauthorized)
		case "no-csrf":
			return "", fmt.Errorf("%w: no token", ErrForbidden)
		}
		return "", nil
	})
	req := func(session, authz string) *http.Request {
		r := httptest.NewRequest("GET", "/x", nil)
		r.Header.Set("X-Test-Session", session)
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		return r
	}
	withSession := Allowed{ServiceAccount: true, Session: true}
	p, err := a.RequestFor(req("multi", ""), withSession, 2)
	if err != nil || p.Account != "multi" || p.Method != Session || p.Project.ID != 2 || p.CanWrite() {
		t.Fatalf("session: %+v %v", p, err)
	}
	if _, err := a.RequestFor(req("multi", ""), withSession, 3); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a project the account is not in: %v", err)
	}
	if _, err := a.RequestFor(req("multi", ""), Allowed{ServiceAccount: true}, 1); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("an endpoint without Session took the session: %v", err)
	}
	if _, err := a.RequestFor(req("expired", ""), withSession, 1); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("expired: %v", err)
	}
	if _, err := a.RequestFor(req("no-csrf", ""), withSession, 1); !errors.Is(err, ErrForbidden) {
		t.Errorf("no CSRF token: %v", err)
	}
	if p, err := a.RequestFor(req("multi", basic("solo", "solo-secret")), withSession, 1); err != nil || p.Account != "solo" {
		t.Errorf("Authorization must win over the session: %+v %v", p, err)
	}
	if _, err := a.RequestFor(req("", ""), withSession, 1); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("no credentials at all: %v", err)
	}
}

func TestSignIn(t *testing.T) {
	a := New(testConfig(), nil)
	ms, err := a.SignIn("multi", "multi-secret")
	if err != nil || len(ms) != 2 || ms[0].Project.ID != 1 || ms[1].Role != "consumer" {
		t.Fatalf("sign-in: %+v %v", ms, err)
	}
	for _, c := range [][2]string{{"multi", "wrong"}, {"nobody", "multi-secret"}, {"multi", ""}} {
		if _, err := a.SignIn(c[0], c[1]); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%q/%q: %v", c[0], c[1], err)
		}
	}
}
