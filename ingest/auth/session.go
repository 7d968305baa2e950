package auth

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"sort"

	"github.com/tributary-dev/tributary/internal/config"
)

// Console sessions: the web console signs a service account in once
// (SignIn) and then sends a session cookie instead of Basic credentials.
// The session store lives with the console; it answers through a
// SessionFunc, so this package knows nothing of cookies or CSRF tokens.

// Session is the method of a request authenticated by a console session.
const Session Method = OAuthBearer + 1

// SessionFunc resolves a request's console session to the service
// account that signed in. It returns "" and nil when the request carries
// no session, and an error wrapping ErrUnauthorized (expired or unknown
// session) or ErrForbidden (a write without the session's CSRF token)
// when it carries one that does not authenticate this request.
type SessionFunc func(r *http.Request) (account string, err error)

// SetSessions makes endpoints that allow Session accept console
// sessions resolved by f. Call it before serving.
func (a *Authenticator) SetSessions(f SessionFunc) { a.sessions = f }

// Membership is a service account's role in one project.
type Membership struct {
	Project *config.Project
	Role    config.Role
}

// SignIn checks a service account's username and secret (in constant
// time, also for unknown usernames) and returns its projects, by id.
func (a *Authenticator) SignIn(user, secret string) ([]Membership, error) {
	if secret == "" {
		return nil, fmt.Errorf("%w: invalid service account credentials", ErrUnauthorized)
	}
	acc, ok := a.accounts[user]
	h := hash(secret)
	var want secretKey
	if ok {
		want = acc.secret
	}
	if subtle.ConstantTimeCompare(want[:], h[:]) != 1 || !ok {
		return nil, fmt.Errorf("%w: invalid service account credentials", ErrUnauthorized)
	}
	return a.Memberships(user), nil
}

// Memberships lists a service account's projects, by id; none for an
// unknown account.
func (a *Authenticator) Memberships(user string) []Membership {
	acc := a.accounts[user]
	if acc == nil {
		return nil
	}
	out := make([]Membership, 0, len(acc.projects))
	for _, m := range acc.projects {
		out = append(out, Membership{Project: m.project, Role: m.role})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Project.ID < out[j].Project.ID })
	return out
}

// session authenticates r by its console session, when the endpoint
// allows it and r has one; ok is false when it has none.
func (a *Authenticator) session(r *http.Request, allow Allowed, projectID int64, hasProject bool) (p Principal, ok bool, err error) {
	if a.sessions == nil || !allow.Session {
		return p, false, nil
	}
	user, err := a.sessions(r)
	if err != nil {
		return p, true, err
	}
	if user == "" {
		return p, false, nil
	}
	p, err = a.member(user, projectID, hasProject)
	p.Method = Session
	return p, true, err
}
