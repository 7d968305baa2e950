package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// TokenIssuer hands out short-lived OAuth bearer tokens for service
// accounts (client-credentials grant). Only the SHA-256 of a token is kept.
// Tokens live in this process; a later store shares them between processes.
type TokenIssuer struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	tokens map[secretKey]issued
}

type issued struct {
	account string
	expires time.Time
}

func newTokenIssuer(ttl time.Duration, now func() time.Time) *TokenIssuer {
	if now == nil {
		now = time.Now
	}
	return &TokenIssuer{ttl: ttl, now: now, tokens: map[secretKey]issued{}}
}

func (t *TokenIssuer) issue(account string) (string, time.Duration) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // cannot happen on Linux
	}
	tok := "trb_" + hex.EncodeToString(b[:])
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.tokens { // sweep: the map stays as small as the live tokens
		if now.After(v.expires) {
			delete(t.tokens, k)
		}
	}
	t.tokens[hash(tok)] = issued{account: account, expires: now.Add(t.ttl)}
	return tok, t.ttl
}

func (t *TokenIssuer) resolve(tok string) (string, bool) {
	if tok == "" {
		return "", false
	}
	h := hash(tok)
	t.mu.Lock()
	v, ok := t.tokens[h]
	t.mu.Unlock()
	if !ok || !t.now().Before(v.expires) {
		return "", false
	}
	return v.account, true
}

// ServeToken implements POST /oauth/token (RFC 6749 §4.4): client id and
// secret are a service account's username and secret, in the form body or
// as HTTP Basic.
func (a *Authenticator) ServeToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "malformed form body")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "only grant_type=client_credentials is supported")
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	acc, known := a.accounts[strings.TrimSpace(id)]
	h := hash(secret)
	var want secretKey
	if known {
		want = acc.secret
	}
	if subtle.ConstantTimeCompare(want[:], h[:]) != 1 || !known || secret == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth"`)
		oauthError(w, http.StatusUnauthorized, "invalid_client", "invalid client credentials")
		return
	}
	tok, ttl := a.oauth.issue(id)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok,
		"token_type":   "Bearer",
		"expires_in":   int(ttl.Seconds()),
	})
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
