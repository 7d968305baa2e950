package auth

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// memTokens is a TokenStore in memory, standing in for the database two
// processes share; fail makes every call fail.
type memTokens struct {
	mu   sync.Mutex
	m    map[[32]byte]memToken
	gets int
	fail bool
}

type memToken struct {
	account string
	exp     int64
}

func (s *memTokens) PutToken(_ context.Context, h [32]byte, account string, exp, now int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("store down")
	}
	for k, v := range s.m {
		if v.exp < now {
			delete(s.m, k)
		}
	}
	s.m[h] = memToken{account, exp}
	return nil
}

func (s *memTokens) Token(_ context.Context, h [32]byte) (string, int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	if s.fail {
		return "", 0, false, errors.New("store down")
	}
	v, ok := s.m[h]
	return v.account, v.exp, ok, nil
}

func TestOAuthSharedAcrossAuthenticators(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	ts := &memTokens{m: map[[32]byte]memToken{}}
	a, b := New(testConfig(), clock), New(testConfig(), clock)
	a.ShareTokens(ts, nil)
	b.ShareTokens(ts, nil)

	r := httptest.NewRequest("POST", "/oauth/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth("multi", "multi-secret")
	w := httptest.NewRecorder()
	a.ServeToken(w, r)
	if w.Code != 200 {
		t.Fatalf("token: %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	tok := body[strings.Index(body, `"access_token":"`)+len(`"access_token":"`):]
	tok = tok[:strings.IndexByte(tok, '"')]
	for h := range ts.m {
		if strings.Contains(tok, string(h[:])) || len(ts.m) != 1 {
			t.Fatal("the store must hold one hash, not the token")
		}
	}
	req := func(on *Authenticator, token string) (Principal, error) {
		r := httptest.NewRequest("POST", "/import?project_id=1", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return on.Request(r, Allowed{OAuth: true})
	}
	p, err := req(b, tok)
	if err != nil || p.Account != "multi" || p.Method != OAuthBearer {
		t.Fatalf("token of A on B: %+v %v", p, err)
	}
	gets := ts.gets
	if _, err := req(b, tok); err != nil || ts.gets != gets {
		t.Fatalf("a known token must be served from B's cache: %v, %d store reads", err, ts.gets-gets)
	}
	guess := "trb_" + strings.Repeat("0a", 32) // the shape of a token, never issued
	if _, err := req(b, guess); !errors.Is(err, ErrUnauthorized) || ts.gets != gets+1 {
		t.Fatalf("unknown token: %v, %d store reads", err, ts.gets-gets)
	}
	for _, junk := range []string{"trb_guess", "Zm9vYmFy", guess + "0", strings.ToUpper(guess)} {
		if _, err := req(b, junk); !errors.Is(err, ErrUnauthorized) || ts.gets != gets+1 {
			t.Fatalf("malformed token %q: %v; it must cost no store read (%d)", junk, err, ts.gets-gets)
		}
	}

	// A store that cannot answer is not a bad credential.
	ts.fail = true
	if _, err := req(b, "trb_"+strings.Repeat("1b", 32)); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("store down: %v, want ErrUnavailable", err)
	}
	w = httptest.NewRecorder()
	r = httptest.NewRequest("POST", "/oauth/token", strings.NewReader("grant_type=client_credentials"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth("multi", "multi-secret")
	a.ServeToken(w, r)
	if w.Code != 503 {
		t.Fatalf("issue with the store down: %d %s", w.Code, w.Body)
	}
	ts.fail = false

	now = now.Add(time.Hour)
	if _, err := req(b, tok); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("expired token on B: %v", err)
	}
	c := New(testConfig(), clock) // a third process that never cached it
	c.ShareTokens(ts, nil)
	if _, err := req(c, tok); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("expired token from the store: %v", err)
	}
}
