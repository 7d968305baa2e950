package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
)

// CookieName is the console's session cookie.
const CookieName = "tributary_session"

// CSRFHeader must carry the session's CSRF token on every request the
// session authenticates that is not a GET, HEAD or OPTIONS. A page of
// another site cannot read the token, so it cannot forge the header.
const CSRFHeader = "X-CSRF-Token"

// session is one sign-in. Its id is only ever kept as a SHA-256, so the
// map's timing reveals nothing of the cookie and a memory dump holds no
// usable id.
type session struct {
	key     [sha256.Size]byte
	account string
	csrf    string
	expires time.Time
}

// sessions keep sign-ins in memory: a restart signs everyone out, which
// costs a sign-in and needs no shared store or key.
type sessions struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, byID: map[[sha256.Size]byte]*session{}}
}

// randomToken is 256 bits from crypto/rand, URL-safe base64.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for account and returns its id (the cookie's
// value) and the session.
func (s *sessions) create(account string) (string, session) {
	id := randomToken()
	se := &session{key: sha256.Sum256([]byte(id)), account: account, csrf: randomToken(), expires: s.now().Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep()
	s.byID[se.key] = se
	return id, *se
}

// sweep drops expired sessions; create calls it, so memory is bounded by
// the sign-ins of one TTL. s.mu is held.
func (s *sessions) sweep() {
	now := s.now()
	for k, se := range s.byID {
		if !now.Before(se.expires) {
			delete(s.byID, k)
		}
	}
}

// get finds the live session whose id is id.
func (s *sessions) get(id string) (session, bool) {
	if id == "" {
		return session{}, false
	}
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.byID[h]
	if !ok || subtle.ConstantTimeCompare(se.key[:], h[:]) != 1 {
		return session{}, false
	}
	if !s.now().Before(se.expires) {
		delete(s.byID, h)
		return session{}, false
	}
	return *se, true
}

func (s *sessions) remove(id string) {
	h := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, h)
}

// fromRequest returns r's session cookie value, "" without one.
func fromRequest(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

// safeMethod: requests that change nothing and need no CSRF token.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// Session is the auth.SessionFunc the server installs: the account of
// r's session cookie, checked for a CSRF token on writes.
func (c *Console) Session(r *http.Request) (string, error) {
	id := fromRequest(r)
	if id == "" {
		return "", nil
	}
	se, ok := c.sessions.get(id)
	if !ok {
		return "", fmt.Errorf("%w: the console session has expired or was signed out; sign in again", auth.ErrUnauthorized)
	}
	if !safeMethod(r.Method) && !validCSRF(r, se) {
		return "", fmt.Errorf("%w: a console session's writes need its %s header", auth.ErrForbidden, CSRFHeader)
	}
	return se.account, nil
}

func validCSRF(r *http.Request, se session) bool {
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}
