// Package auth resolves the credentials of an API request to a project.
//
// Secrets are never compared with ==: every lookup goes through the SHA-256
// of the presented value (so map timing reveals nothing about the secret)
// and ends in a constant-time compare. Nothing here logs a credential.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/internal/config"
)

// Method is how a request proved who it is.
type Method int

const (
	ProjectSecret Method = iota + 1
	ProjectToken
	ServiceAccount
	OAuthBearer
)

func (m Method) String() string {
	switch m {
	case ProjectSecret:
		return "secret"
	case ProjectToken:
		return "token"
	case ServiceAccount:
		return "service_account"
	case OAuthBearer:
		return "oauth"
	case Session:
		return "session"
	}
	return "none"
}

// Principal is an authenticated caller acting on one project.
type Principal struct {
	Project *config.Project
	Method  Method
	Account string      // service account username, for SA and OAuth
	Role    config.Role // the account's role in Project; owner for secret and token
}

// CanWrite reports whether the principal may write to its project.
func (p Principal) CanWrite() bool { return p.Role.CanWrite() }

// Errors map to HTTP statuses in the API layer: ErrUnauthorized → 401,
// ErrForbidden → 403, ErrUnavailable → 503 (the shared token store could
// not answer: the credential may be good, so 401 would mislead).
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrUnavailable  = errors.New("unavailable")
)

type secretKey [sha256.Size]byte

func hash(s string) secretKey { return sha256.Sum256([]byte(s)) }

type membership struct {
	project *config.Project
	role    config.Role
}

type account struct {
	secret   secretKey
	projects map[int64]membership
}

type projectCred struct {
	value   secretKey
	project *config.Project
}

// Authenticator knows every project's credentials.
type Authenticator struct {
	projects map[int64]*config.Project
	secrets  map[secretKey]projectCred
	tokens   map[secretKey]projectCred
	accounts map[string]*account
	oauth    *TokenIssuer
	sessions SessionFunc // console sessions (session.go); nil: none
}

// New indexes the configured projects. The config must outlive it.
func New(cfg *config.Config, now func() time.Time) *Authenticator {
	a := &Authenticator{
		projects: map[int64]*config.Project{},
		secrets:  map[secretKey]projectCred{},
		tokens:   map[secretKey]projectCred{},
		accounts: map[string]*account{},
	}
	for i := range cfg.Projects {
		p := &cfg.Projects[i]
		a.projects[p.ID] = p
		a.secrets[hash(p.APISecret)] = projectCred{hash(p.APISecret), p}
		a.tokens[hash(p.Token)] = projectCred{hash(p.Token), p}
		for _, sa := range p.ServiceAccounts {
			acc := a.accounts[sa.Username]
			if acc == nil {
				acc = &account{secret: hash(sa.Secret), projects: map[int64]membership{}}
				a.accounts[sa.Username] = acc
			}
			acc.projects[p.ID] = membership{p, sa.Role}
		}
	}
	a.oauth = newTokenIssuer(time.Duration(cfg.OAuthTTL), now)
	return a
}

// ShareTokens keeps OAuth tokens in ts, so that a token one process
// issued is accepted by every process using the same store. Call it
// before serving; log (nil: slog.Default) hears of store failures.
func (a *Authenticator) ShareTokens(ts TokenStore, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	a.oauth.store, a.oauth.log = ts, log
}

// Project returns a configured project by id.
func (a *Authenticator) Project(id int64) (*config.Project, bool) {
	p, ok := a.projects[id]
	return p, ok
}

// ProjectByToken finds the project whose token is tok (for /track-style
// payload auth and the migration service).
func (a *Authenticator) ProjectByToken(tok string) (*config.Project, bool) {
	return lookup(a.tokens, tok)
}

func lookup(m map[secretKey]projectCred, v string) (*config.Project, bool) {
	if v == "" {
		return nil, false
	}
	h := hash(v)
	c, ok := m[h]
	if !ok || subtle.ConstantTimeCompare(c.value[:], h[:]) != 1 {
		return nil, false
	}
	return c.project, true
}

// Allowed lists which methods an endpoint accepts.
// Session is a console session (session.go): it stands for a service
// account, so only endpoints the console calls allow it.
type Allowed struct{ Secret, Token, ServiceAccount, OAuth, Session bool }

// Request authenticates r for an endpoint accepting the given methods.
// project_id comes from the query string, as the public API defines.
func (a *Authenticator) Request(r *http.Request, allow Allowed) (Principal, error) {
	projectID, hasProject, err := queryProject(r)
	if err != nil {
		return Principal{}, err
	}
	return a.request(r, allow, projectID, hasProject)
}

// RequestFor authenticates r for a route that names the project in its
// path (the app API): the principal must belong to that project.
func (a *Authenticator) RequestFor(r *http.Request, allow Allowed, projectID int64) (Principal, error) {
	return a.request(r, allow, projectID, true)
}

func (a *Authenticator) request(r *http.Request, allow Allowed, projectID int64, hasProject bool) (Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if p, ok, err := a.session(r, allow, projectID, hasProject); ok {
			return p, err
		}
		return Principal{}, fmt.Errorf("%w: missing Authorization header", ErrUnauthorized)
	}
	scheme, rest, _ := strings.Cut(h, " ")
	switch strings.ToLower(scheme) {
	case "bearer":
		if !allow.OAuth {
			return Principal{}, fmt.Errorf("%w: OAuth tokens are not accepted here", ErrUnauthorized)
		}
		acc, ok, err := a.oauth.resolve(r.Context(), strings.TrimSpace(rest))
		if err != nil {
			return Principal{}, fmt.Errorf("%w: OAuth tokens cannot be checked now: %w", ErrUnavailable, err)
		}
		if !ok {
			return Principal{}, fmt.Errorf("%w: invalid or expired OAuth token", ErrUnauthorized)
		}
		p, err := a.member(acc, projectID, hasProject)
		p.Method = OAuthBearer
		return p, err
	case "basic":
		user, pass, ok := basicCredentials(strings.TrimSpace(rest))
		if !ok {
			return Principal{}, fmt.Errorf("%w: malformed Basic credentials", ErrUnauthorized)
		}
		return a.basic(user, pass, projectID, hasProject, allow)
	}
	return Principal{}, fmt.Errorf("%w: unsupported Authorization scheme", ErrUnauthorized)
}

func (a *Authenticator) basic(user, pass string, projectID int64, hasProject bool, allow Allowed) (Principal, error) {
	if pass != "" {
		if !allow.ServiceAccount {
			return Principal{}, fmt.Errorf("%w: service accounts are not accepted here", ErrUnauthorized)
		}
		acc, ok := a.accounts[user]
		h := hash(pass)
		// Compare even for an unknown user so timing does not reveal which usernames exist.
		var want secretKey
		if ok {
			want = acc.secret
		}
		if subtle.ConstantTimeCompare(want[:], h[:]) != 1 || !ok {
			return Principal{}, fmt.Errorf("%w: invalid service account credentials", ErrUnauthorized)
		}
		p, err := a.member(user, projectID, hasProject)
		p.Method = ServiceAccount
		return p, err
	}
	// A project credential as the user name, empty password.
	if p, ok := lookup(a.secrets, user); ok && allow.Secret {
		if hasProject && projectID != p.ID {
			return Principal{}, fmt.Errorf("%w: the API secret does not belong to project %d", ErrUnauthorized, projectID)
		}
		return Principal{Project: p, Method: ProjectSecret, Role: config.RoleOwner}, nil
	}
	if p, ok := lookup(a.tokens, user); ok && allow.Token {
		if hasProject && projectID != p.ID {
			return Principal{}, fmt.Errorf("%w: the project token does not belong to project %d", ErrUnauthorized, projectID)
		}
		return Principal{Project: p, Method: ProjectToken, Role: config.RoleOwner}, nil
	}
	return Principal{}, fmt.Errorf("%w: invalid credentials", ErrUnauthorized)
}

// member scopes a service account to the requested project. With no
// project_id, an account that belongs to exactly one project acts on it.
func (a *Authenticator) member(user string, projectID int64, hasProject bool) (Principal, error) {
	acc := a.accounts[user]
	if acc == nil {
		return Principal{}, fmt.Errorf("%w: invalid service account credentials", ErrUnauthorized)
	}
	if !hasProject {
		if len(acc.projects) != 1 {
			return Principal{}, fmt.Errorf("%w: project_id is required with service account credentials", ErrUnauthorized)
		}
		for id := range acc.projects {
			projectID = id
		}
	}
	m, ok := acc.projects[projectID]
	if !ok {
		return Principal{}, fmt.Errorf("%w: service account %q is not a member of project %d", ErrUnauthorized, user, projectID)
	}
	return Principal{Project: m.project, Account: user, Role: m.role}, nil
}

func queryProject(r *http.Request) (int64, bool, error) {
	v := r.URL.Query().Get("project_id")
	if v == "" {
		return 0, false, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, false, fmt.Errorf("%w: project_id must be a positive integer", ErrUnauthorized)
	}
	return id, true, nil
}

// basicCredentials accepts base64 user:pass and, as the public API does,
// the plain-text form.
func basicCredentials(v string) (user, pass string, ok bool) {
	if b, err := base64.StdEncoding.DecodeString(v); err == nil {
		v = string(b)
	}
	user, pass, ok = strings.Cut(v, ":")
	if !ok { // a bare token with no colon
		return v, "", v != ""
	}
	return user, pass, user != ""
}
