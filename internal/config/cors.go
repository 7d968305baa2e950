package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// validateCORS checks cors_allowed_origins and normalises each entry to
// the form browsers send in the Origin header (lower-case scheme and
// host), so a lookup is a plain comparison.
func (p *Project) validateCORS(key string) error {
	for i, o := range p.CORSAllowedOrigins {
		k := fmt.Sprintf("%s[%d]", key, i)
		norm, err := normalizeOrigin(o)
		if err != nil {
			return bad(k, "%v; got %q", err, o)
		}
		if slices.Contains(p.CORSAllowedOrigins[:i], norm) {
			return bad(k, "%q is listed twice", norm)
		}
		p.CORSAllowedOrigins[i] = norm
	}
	return nil
}

func normalizeOrigin(o string) (string, error) {
	if strings.TrimSpace(o) == "*" {
		return "", fmt.Errorf("leave the list out to allow every origin")
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("must be an origin, scheme://host[:port]")
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") {
		return "", fmt.Errorf("must be an origin, scheme://host[:port], with no path, query or trailing slash")
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), nil
}

// AllowsOrigin reports whether a browser page of origin (the Origin
// header) may send this project's data: always when the project lists no
// origins (cors_allowed_origins left out), else only a listed one. An
// empty list, [], allows none.
func (p *Project) AllowsOrigin(origin string) bool {
	if p.CORSAllowedOrigins == nil {
		return true
	}
	return slices.Contains(p.CORSAllowedOrigins, strings.ToLower(origin))
}
