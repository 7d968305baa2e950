package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// profileProject is the updates of one request for one project.
type profileProject struct {
	project *config.Project
	batch   store.Batch // Profiles[i].Ref is the request index
}

// handleProfiles serves /engage (user profiles) and /groups: token auth
// per update ($token), the body encodings of /track, and the legacy 1/0
// answer (verbose=1: JSON). Updates apply in request order and are
// durable when the answer is sent; strict=1 answers 400 with
// failed_records when any update failed.
func (s *Server) handleProfiles(kind profile.Kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			writeTrackError(w, http.StatusMethodNotAllowed, "use GET or POST")
			return
		}
		buf := s.bufs.Get().(*bytes.Buffer)
		defer s.bufs.Put(buf)
		tr, ok := s.readTrack(w, r, buf)
		if !ok {
			return
		}
		recs, err := record.Split(tr.body, tr.ndjson, s.limits, nil)
		if err == nil && len(recs) == 0 {
			err = fmt.Errorf("%w: the request contains no updates", errBadBody)
		}
		if err != nil {
			s.trackRejected(w, tr.verbose, err)
			return
		}
		cred := credentialProject{s: s, r: r}
		parts, failures := s.parseProfiles(kind, recs, &cred)
		if cred.unavailable {
			writeTrackError(w, http.StatusServiceUnavailable, "credentials cannot be checked now; retry")
			return
		}
		parts, failures = refuseOrigins(w, r, parts, failures, func(pp *profileProject) *config.Project { return pp.project },
			func(pp *profileProject, fails []record.Failure, msg string) []record.Failure {
				for _, u := range pp.batch.Profiles {
					fails = append(fails, record.Failure{Index: u.Ref, Field: "$token", Message: "'$token' is invalid: " + msg})
				}
				return fails
			})
		for _, pp := range parts {
			if pp.project.Region != s.cfg.Region {
				writeTrackError(w, http.StatusForbidden, residencyMessage(pp.project, s.cfg.Region))
				return
			}
		}
		for _, pp := range parts {
			n := int64(0)
			for _, u := range pp.batch.Profiles {
				n += int64(len(recs[u.Ref]))
			}
			if !s.limiter.Allow(r.Context(), pp.project.ID, n, int64(pp.project.RateLimit.BytesPerMinute)) {
				writeTrackError(w, http.StatusTooManyRequests, "Project exceeded rate limits. Please retry the request with exponential backoff.")
				return
			}
		}
		for i, pp := range parts {
			res, err := s.commit(r.Context(), pp.batch)
			if err != nil {
				s.log.Error("profile commit failed", "project", pp.project.ID, "updates", len(pp.batch.Profiles), "err", err)
				msg := "the updates could not be stored; nothing from this request was applied, retry"
				if i > 0 {
					msg = fmt.Sprintf("the updates of project %d could not be stored; retry them", pp.project.ID)
				}
				writeTrackError(w, http.StatusServiceUnavailable, msg)
				return
			}
			for _, rj := range res.Rejected {
				failures = append(failures, profileFailure(rj.Ref, rj.Err))
			}
			s.met.accepted.Add(int64(res.Profiles), strconv.FormatInt(pp.project.ID, 10))
		}
		slices.SortFunc(failures, func(a, b record.Failure) int { return a.Index - b.Index })
		if tr.strict && len(failures) > 0 {
			writeJSON(w, http.StatusBadRequest, strictInvalid{
				Code: 400, Error: "some updates in the request failed validation", Status: "Bad Request",
				Imported: len(recs) - len(failures), Failed: failures,
			})
			return
		}
		msg := ""
		if len(failures) > 0 {
			f := failures[0]
			msg = fmt.Sprintf("%d of %d updates failed; first: update %d: %s", len(failures), len(recs), f.Index, f.Message)
		}
		writeLegacy(w, tr.verbose, len(failures) < len(recs), msg)
	}
}

// parseProfiles parses each update and sorts it by the project its
// $token names, or, without $token, the project the request's
// credentials name (cred).
func (s *Server) parseProfiles(kind profile.Kind, recs [][]byte, cred *credentialProject) ([]*profileProject, []record.Failure) {
	var (
		ps     = profile.Parser{NoToken: true} // checked below, against cred
		parts  []*profileProject
		failed []record.Failure
	)
	for i, rec := range recs {
		var u profile.Update
		var err error
		if kind == profile.User {
			u, err = ps.ParseUser(rec)
		} else {
			u, err = ps.ParseGroup(rec)
		}
		if err != nil {
			failed = append(failed, profileFailure(i, err))
			continue
		}
		var proj *config.Project
		if u.Token == "" {
			var why string
			if proj, why = cred.project(); proj == nil {
				failed = append(failed, record.Failure{Index: i, Field: "$token", Message: "'$token' is invalid: " + why})
				continue
			}
		} else if p, ok := s.auth.ProjectByToken(u.Token); ok {
			proj = p
		} else {
			failed = append(failed, record.Failure{Index: i, Field: "$token", Message: "'$token' is invalid: not the token of any project on this server"})
			continue
		}
		var pp *profileProject
		for _, c := range parts {
			if c.project == proj {
				pp = c
			}
		}
		if pp == nil {
			pp = &profileProject{project: proj, batch: store.Batch{Project: proj.ID}}
			parts = append(parts, pp)
		}
		pp.batch.Profiles = append(pp.batch.Profiles, store.ProfileUpdate{Update: u, Ref: i})
	}
	return parts, failed
}

func profileFailure(i int, err error) record.Failure {
	f := record.Failure{Index: i, Message: err.Error()}
	if fe, ok := errors.AsType[*profile.FieldError](err); ok {
		f.Field, f.Message = fe.Field, fe.Message
	}
	return f
}

// credentialProject is the project a /engage or /groups request's
// credentials name, for updates without $token: mixpanel-import leaves it
// out when it authenticates with the API secret or a service account.
// The credentials are checked once, when the first such update needs
// them; an update with $token never looks at them (the Node SDK sends its
// secret to every endpoint). A browser's cross-site request never names a
// project by its credentials (crossSiteBrowser).
type credentialProject struct {
	s           *Server
	r           *http.Request
	done        bool
	proj        *config.Project
	why         string // why there is no project
	unavailable bool   // the credential store did not answer: 503
}

func (c *credentialProject) project() (*config.Project, string) {
	if c.done {
		return c.proj, c.why
	}
	c.done = true
	const need = "missing; send the project token in $token, or authenticate the request with the project's API secret or a service account"
	if crossSiteBrowser(c.r) {
		// Its Authorization header may be one the browser re-sends on its
		// own, for a page the credential's owner never meant to trust.
		c.why = "missing; browsers must send the project token in $token (a browser request from another site is never authenticated by its credentials)"
		return nil, c.why
	}
	if c.r.Header.Get("Authorization") == "" {
		c.why = need
		return nil, c.why
	}
	p, err := c.s.auth.Request(c.r, auth.Allowed{Secret: true, Token: true, ServiceAccount: true, OAuth: true})
	switch {
	case errors.Is(err, auth.ErrUnavailable):
		c.s.log.Warn("authentication unavailable", "err", err)
		c.unavailable, c.why = true, "credentials cannot be checked now"
	case err != nil:
		c.why = need + "; the request's credentials were refused: " + err.Error()
	case !p.CanWrite():
		c.why = fmt.Sprintf("missing, and service account %q has role %s in project %d; writing needs owner or admin", p.Account, p.Role, p.Project.ID)
	default:
		c.proj = p.Project
	}
	return c.proj, c.why
}
