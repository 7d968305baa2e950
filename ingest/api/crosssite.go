package api

import (
	"net/http"
	"net/url"
	"strings"
)

// A browser that once sent Basic credentials to this host (after a 401's
// Basic challenge, or from a user:pass@ URL) re-sends them on its own, also
// when a page of another site makes the request: a form POST or an <img>
// needs no preflight. So a request a browser sent cross-site never
// authenticates with its Authorization header where that would let such a
// page write: token-less /engage and /groups updates, /import, and every
// other write that takes a secret or a service account (lookup tables, the
// app API's import and connection management).

// crossSiteWriteMsg refuses a credentialed write a browser sent for
// another site's page.
const crossSiteWriteMsg = "writes with a secret or a service account are not taken from a browser on another site: send them from a server (or this server's own pages)"

// crossSiteBrowser reports whether r was sent by a browser for a page that
// is not this server's own. Sec-Fetch-Site, which pages cannot set, says
// so when the browser sends it; older browsers only send Origin, which is
// then compared with the Host the request was sent to. Server-side
// clients send neither.
func crossSiteBrowser(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "cross-site" || site == "same-site"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" { // "null": sandboxed frames, cross-site redirects
		return true
	}
	return !strings.EqualFold(u.Host, r.Host)
}
