package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/ratelimit"
)

// Request limits of POST /oauth/token (per process). A client needs one
// token per oauth_token_ttl; the limits leave room for a fleet of workers
// starting at once and bound how fast anyone can guess a secret: per
// client_id (every id counts, known or not, so the limit does not tell
// which accounts exist), and per client address.
const (
	tokenClientBurst, tokenClientEvery = 60, time.Second
	tokenAddrBurst, tokenAddrEvery     = 120, time.Second / 2
)

// TokenStore keeps tokens where every process of a deployment finds them
// (store.Shared satisfies it). It only ever sees a token's SHA-256.
type TokenStore interface {
	PutToken(ctx context.Context, hash [32]byte, account string, expiresMs, nowMs int64) error
	Token(ctx context.Context, hash [32]byte) (account string, expiresMs int64, ok bool, err error)
}

// TokenIssuer hands out short-lived OAuth bearer tokens for service
// accounts (client-credentials grant). Only the SHA-256 of a token is kept.
// Without a TokenStore tokens live in this process; with one, a token any
// process issued is valid on all of them.
type TokenIssuer struct {
	ttl time.Duration
	now func() time.Time

	mu     sync.Mutex
	tokens map[secretKey]issued // live tokens; with a store, a cache of it
	store  TokenStore
	log    *slog.Logger // store failures; set with store

	byClient *ratelimit.Keyed[secretKey] // SHA-256 of the client_id: a long id costs no memory
	byAddr   *ratelimit.Keyed[netip.Addr]
}

type issued struct {
	account string
	expires time.Time
}

func newTokenIssuer(ttl time.Duration, now func() time.Time) *TokenIssuer {
	if now == nil {
		now = time.Now
	}
	return &TokenIssuer{ttl: ttl, now: now, tokens: map[secretKey]issued{}, log: slog.Default(),
		byClient: ratelimit.NewKeyed[secretKey](ratelimit.Rate{Burst: tokenClientBurst, Every: tokenClientEvery}, now, 0),
		byAddr:   ratelimit.NewKeyed[netip.Addr](ratelimit.Rate{Burst: tokenAddrBurst, Every: tokenAddrEvery}, now, 0)}
}

func (t *TokenIssuer) issue(ctx context.Context, account string) (string, time.Duration, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // cannot happen on Linux
	}
	tok := tokenPrefix + hex.EncodeToString(b[:])
	now := t.now()
	h := hash(tok)
	v := issued{account: account, expires: now.Add(t.ttl)}
	// The store first: a token is handed out only once every process can
	// resolve it.
	if t.store != nil {
		if err := t.store.PutToken(ctx, h, account, v.expires.UnixMilli(), now.UnixMilli()); err != nil {
			return "", 0, fmt.Errorf("store token: %w", err)
		}
	}
	t.remember(h, v, now)
	return tok, t.ttl, nil
}

// remember caches a live token, sweeping expired ones so the map stays
// as small as the live tokens.
func (t *TokenIssuer) remember(h secretKey, v issued, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, old := range t.tokens {
		if now.After(old.expires) {
			delete(t.tokens, k)
		}
	}
	t.tokens[h] = v
}

// resolve returns the account of a live token. A token another process
// issued is read from the store once and then cached until it expires:
// tokens cannot be revoked, so the cache never serves a stale answer, and
// a client reusing its token costs no round trip. Unknown tokens are not
// cached, so guessing cannot fill memory. err is set only when the store
// could not answer.
func (t *TokenIssuer) resolve(ctx context.Context, tok string) (string, bool, error) {
	if !issuedShape(tok) {
		// Not a token this server could have issued: no store round trip,
		// so garbage bearers cost a 401 and nothing more.
		return "", false, nil
	}
	h := hash(tok)
	now := t.now()
	t.mu.Lock()
	v, ok := t.tokens[h]
	t.mu.Unlock()
	if !ok && t.store != nil {
		acc, exp, found, err := t.store.Token(ctx, h)
		if err != nil {
			return "", false, fmt.Errorf("look up token: %w", err)
		}
		if found {
			v, ok = issued{account: acc, expires: time.UnixMilli(exp)}, true
			if now.Before(v.expires) {
				t.remember(h, v, now)
			}
		}
	}
	if !ok || !now.Before(v.expires) {
		return "", false, nil
	}
	return v.account, true, nil
}

// tokenPrefix starts every token issue hands out: 64 hex digits follow.
const tokenPrefix = "trb_"

// issuedShape reports whether tok looks like a token issue made.
func issuedShape(tok string) bool {
	if len(tok) != len(tokenPrefix)+64 || !strings.HasPrefix(tok, tokenPrefix) {
		return false
	}
	for i := len(tokenPrefix); i < len(tok); i++ {
		if c := tok[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ServeToken implements POST /oauth/token (RFC 6749 §4.4): client id and
// secret are a service account's username and secret, in the form body or
// as HTTP Basic. The client id must be the username exactly: a token
// issued for " bot" would name no account and never work.
func (a *Authenticator) ServeToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	if ok, wait := a.oauth.byAddr.Allow(ratelimit.ClientAddr(r.RemoteAddr)); !ok {
		slowDown(w, wait, "too many token requests from this address")
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
	if ok, wait := a.oauth.byClient.Allow(hash(id)); !ok {
		slowDown(w, wait, "too many token requests for this client_id")
		return
	}
	acc, known := a.accounts[id]
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
	tok, ttl, err := a.oauth.issue(r.Context(), id)
	if err != nil {
		// The cause names the store, never the token or the secret.
		a.oauth.log.Warn("oauth: cannot issue a token", "account", id, "err", err)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "cannot issue a token now; retry")
		return
	}
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

// slowDown answers 429 with Retry-After. The error code is RFC 8628's
// slow_down: RFC 6749 has none for a rate limit.
func slowDown(w http.ResponseWriter, wait time.Duration, why string) {
	secs := max(int((wait+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	oauthError(w, http.StatusTooManyRequests, "slow_down", fmt.Sprintf("%s; retry after %d s", why, secs))
}
