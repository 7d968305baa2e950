package auth

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func tokenRequest(a *Authenticator, remote string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	a.ServeToken(w, r)
	return w
}

func clientForm(id, secret string) url.Values {
	return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
}

// A client_id is an account name exactly: with spaces around it the token
// it got would name no account and never work, so none is issued.
func TestOAuthClientIDExact(t *testing.T) {
	a := New(testConfig(), nil)
	cases := []struct {
		id   string
		want int
	}{
		{"multi", 200},
		{" multi", 401},
		{"multi ", 401},
		{"\tmulti", 401},
		{"MULTI", 401},
	}
	for _, c := range cases {
		w := tokenRequest(a, "192.0.2.1:1", clientForm(c.id, "multi-secret"))
		if w.Code != c.want {
			t.Errorf("client_id %q: %d %s, want %d", c.id, w.Code, w.Body, c.want)
		}
	}
}

func TestOAuthTokenRateLimits(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := New(testConfig(), func() time.Time { return now })
	// Per client: guessing one account's secret from many addresses stops
	// at the burst, and so does asking for an unknown account (the limit
	// must not tell which accounts exist).
	for _, id := range []string{"multi", "nobody"} {
		for i := range tokenClientBurst {
			if w := tokenRequest(a, "192.0.2."+string(rune('0'+i%10))+":1", clientForm(id, "wrong")); w.Code != 401 {
				t.Fatalf("%s guess %d: %d %s", id, i, w.Code, w.Body)
			}
		}
		w := tokenRequest(a, "198.51.100.1:1", clientForm(id, "multi-secret"))
		if w.Code != 429 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), `"error":"slow_down"`) {
			t.Fatalf("%s over its limit: %d %v %s", id, w.Code, w.Header(), w.Body)
		}
	}
	if w := tokenRequest(a, "198.51.100.1:1", clientForm("solo", "solo-secret")); w.Code != 200 {
		t.Fatalf("another client is not limited by the first: %d %s", w.Code, w.Body)
	}
	now = now.Add(time.Second)
	if w := tokenRequest(a, "198.51.100.1:1", clientForm("multi", "multi-secret")); w.Code != 200 {
		t.Fatalf("a second later: %d %s", w.Code, w.Body)
	}

	// Per address: one address spraying client ids.
	b := New(testConfig(), func() time.Time { return now })
	for i := range tokenAddrBurst {
		if w := tokenRequest(b, "203.0.113.9:1", clientForm("id-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "x")); w.Code != 401 {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
	}
	if w := tokenRequest(b, "203.0.113.9:2", clientForm("multi", "multi-secret")); w.Code != 429 {
		t.Fatalf("address over its limit: %d %s", w.Code, w.Body)
	}
	if w := tokenRequest(b, "203.0.113.10:1", clientForm("multi", "multi-secret")); w.Code != 200 {
		t.Fatalf("another address: %d %s", w.Code, w.Body)
	}
}
