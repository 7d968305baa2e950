// Package console is the web console `tributary serve` answers at /: a
// page of plain ES modules and one stylesheet, embedded in the binary
// (no build step, no CDN: it works offline), that shows a project's
// imports, runs, previews, usage and migrations. Every figure it shows
// comes from the public and app APIs; this package only serves the files
// and the sign-in (service account username and secret → a session
// cookie the APIs accept, see ingest/auth's SessionFunc).
package console

import (
	"embed"
	"encoding/json"

	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
)

//go:embed web
var files embed.FS

// Accounts checks sign-ins and lists an account's projects
// (*auth.Authenticator).
type Accounts interface {
	SignIn(user, secret string) ([]auth.Membership, error)
	Memberships(user string) []auth.Membership
}

// Options configure the console.
type Options struct {
	Accounts Accounts
	// TTL is how long a sign-in lasts.
	TTL time.Duration
	// Secure marks the cookie Secure (the server speaks TLS).
	Secure bool
	// Region is the server's; the console lists only projects served here.
	Region string
	Logger *slog.Logger     // nil: slog.Default()
	Now    func() time.Time // nil: time.Now
}

// Console serves the console's files and its sign-in.
type Console struct {
	opt      Options
	sessions *sessions
	web      fs.FS
}

// New builds the console.
func New(o Options) *Console {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	web, _ := fs.Sub(files, "web") // the directory is embedded: cannot fail
	return &Console{opt: o, sessions: newSessions(o.TTL, o.Now), web: web}
}

// Wrap serves the console at / and /console/…, everything else from api.
func (c *Console) Wrap(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.handleIndex)
	mux.Handle("GET /console/", c.assets())
	mux.HandleFunc("POST /console/session", c.handleSignIn)
	mux.HandleFunc("GET /console/session", c.handleWhoAmI)
	mux.HandleFunc("DELETE /console/session", c.handleSignOut)
	mux.Handle("/", quietChallenge(api))
	return mux
}

// pageHeaders keep the console's pages to their own files: no inline
// script, nothing from another origin, no framing.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func (c *Console) handleIndex(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(c.web, "index.html")
	if err != nil {
		http.Error(w, "console missing from this build", http.StatusInternalServerError)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func (c *Console) assets() http.Handler {
	fsrv := http.StripPrefix("/console/", http.FileServerFS(c.web))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // files only, no directory listings
			http.NotFound(w, r)
			return
		}
		pageHeaders(w)
		w.Header().Set("Cache-Control", "no-cache") // the files change with the binary
		fsrv.ServeHTTP(w, r)
	})
}

type projectView struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Role   string `json:"role"`
	Region string `json:"region"`
	Write  bool   `json:"can_write"`
}

type sessionView struct {
	Account   string        `json:"account"`
	Projects  []projectView `json:"projects"`
	CSRFToken string        `json:"csrf_token"`
	Expires   time.Time     `json:"expires"`
}

func (c *Console) view(se session) sessionView {
	v := sessionView{Account: se.account, CSRFToken: se.csrf, Expires: se.expires.UTC(), Projects: []projectView{}}
	for _, m := range c.opt.Accounts.Memberships(se.account) {
		if string(m.Project.Region) != c.opt.Region {
			continue // served by another region's host
		}
		v.Projects = append(v.Projects, projectView{ID: m.Project.ID, Name: m.Project.Name, Role: string(m.Role),
			Region: string(m.Project.Region), Write: m.Role.CanWrite()})
	}
	return v
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg, "status": "error"})
}

// crossSite: a browser sent r for another site's page (Sec-Fetch-Site,
// which pages cannot set). A sign-in from there would log the victim's
// browser into the attacker's account.
func crossSite(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "cross-site" || site == "same-site"
}

func (c *Console) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		writeError(w, http.StatusForbidden, "sign in from this server's own console page")
		return
	}
	var in struct {
		Username string `json:"username"`
		Secret   string `json:"secret"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<10))
	if err != nil || json.Unmarshal(body, &in) != nil {
		writeError(w, http.StatusBadRequest, `the body must be {"username":"…","secret":"…"}`)
		return
	}
	in.Username = strings.TrimSpace(in.Username)
	if _, err := c.opt.Accounts.SignIn(in.Username, in.Secret); err != nil {
		// Never the secret; the username helps an operator see who failed.
		c.opt.Logger.Info("console sign-in refused", "account", in.Username)
		writeError(w, http.StatusUnauthorized, "wrong username or secret")
		return
	}
	id, se := c.sessions.create(in.Username)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, Secure: c.opt.Secure,
		SameSite: http.SameSiteStrictMode, Expires: se.expires, MaxAge: int(se.expires.Sub(c.opt.Now()).Seconds())})
	c.opt.Logger.Info("console sign-in", "account", in.Username)
	writeJSON(w, http.StatusOK, c.view(se))
}

func (c *Console) handleWhoAmI(w http.ResponseWriter, r *http.Request) {
	se, ok := c.sessions.get(fromRequest(r))
	if !ok {
		writeError(w, http.StatusUnauthorized, "not signed in")
		return
	}
	writeJSON(w, http.StatusOK, c.view(se))
}

func (c *Console) handleSignOut(w http.ResponseWriter, r *http.Request) {
	id := fromRequest(r)
	if se, ok := c.sessions.get(id); ok {
		if !validCSRF(r, se) {
			writeError(w, http.StatusForbidden, "signing out needs the session's "+CSRFHeader+" header")
			return
		}
		c.sessions.remove(id)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: c.opt.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ConsoleHeader marks the console's own API requests.
const ConsoleHeader = "X-Tributary-Console"

// quietChallenge drops the Basic challenge from a 401 answered to the
// console (a session cookie or ConsoleHeader, and no Authorization
// header): the console, whose session ended, must show its own sign-in
// form, and a browser that sees a challenge opens its password dialog.
func quietChallenge(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || (fromRequest(r) == "" && r.Header.Get(ConsoleHeader) == "") {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&quietWriter{ResponseWriter: w}, r)
	})
}

type quietWriter struct{ http.ResponseWriter }

func (q *quietWriter) WriteHeader(code int) {
	if code == http.StatusUnauthorized {
		q.Header().Del("WWW-Authenticate")
	}
	q.ResponseWriter.WriteHeader(code)
}

func (q *quietWriter) Flush() {
	if f, ok := q.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (q *quietWriter) Unwrap() http.ResponseWriter { return q.ResponseWriter }
