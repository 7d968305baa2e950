package api

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/internal/config"
)

// trackMaxAge is how far back /track accepts events: the public docs say
// older events are silently dropped (the answer is still 1), because /track
// is for live data and /import for history.
const trackMaxAge = 5 * 24 * time.Hour

// trackErrorBody is the ErrorResponse of /track, /engage and /groups in the
// public spec: {"error":"…","status":"error"}.
type trackErrorBody struct {
	Error  string `json:"error"`
	Status string `json:"status"`
}

func writeTrackError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, trackErrorBody{Error: msg, Status: "error"})
}

// trackRequest is what the transport-level parsing of a /track request
// yields, before any record is looked at.
type trackRequest struct {
	body    []byte // JSON: an array, NDJSON or a single object
	ndjson  bool
	verbose bool
	strict  bool   // strict=1: per-record errors as a 400 (/engage, /groups)
	ip      string // the request's IP when ip=1, else ""
}

// parseTrack finds the payload among the encodings SDKs send: form data=
// (base64 or raw JSON; also as text/plain, which sendBeacon sends), GET
// ?data=, or a plain JSON body. Parameters may come in the query or, for
// form posts (mixpanel-python), in the form; the rest of what SDKs add
// (_ cache busters, img, test, callback) is ignored.
func parseTrack(r *http.Request, raw []byte) (trackRequest, error) {
	q := r.URL.Query()
	params := q
	tr := trackRequest{ndjson: isNDJSON(r)}
	form := r.Method == http.MethodGet || isForm(r) || formBody(raw) ||
		(len(bytes.TrimSpace(raw)) == 0 && q.Get("data") != "")
	if form {
		var f url.Values
		if r.Method != http.MethodGet {
			var err error
			if f, err = url.ParseQuery(string(raw)); err != nil {
				return tr, fmt.Errorf("%w: malformed form body: %v", errBadBody, err)
			}
		}
		params = mergeValues(q, f)
		data, err := legacyData(f, q)
		if err != nil {
			return tr, err
		}
		tr.body, tr.ndjson = data, false
	} else {
		tr.body = raw
	}
	tr.verbose = params.Get("verbose") == "1"
	tr.strict = params.Get("strict") == "1"
	if params.Get("ip") == "1" {
		tr.ip = remoteIP(r)
	}
	return tr, nil
}

// mergeValues lets form fields override query parameters of the same name.
func mergeValues(q, f url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = v
	}
	for k, v := range f {
		out[k] = v
	}
	return out
}

// remoteIP is the peer address. X-Forwarded-For is not trusted: any client
// could set it, and the server has no configured list of trusted proxies.
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// readTrack reads a /track, /engage or /groups request into buf and finds
// its payload; on failure it has answered.
func (s *Server) readTrack(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) (trackRequest, bool) {
	buf.Reset()
	if r.Method == http.MethodPost {
		if err := readBody(r, buf, maxBodyBytes); err != nil {
			s.trackRejected(w, r.URL.Query().Get("verbose") == "1", err)
			return trackRequest{}, false
		}
	}
	tr, err := parseTrack(r, buf.Bytes())
	if err != nil {
		s.trackRejected(w, tr.verbose || r.URL.Query().Get("verbose") == "1", err)
		return tr, false
	}
	return tr, true
}

// trackProject is the decoded share of one project in a /track request.
type trackProject struct {
	group   *trackGroup
	dec     *decodeState
	tooOld  int
	project string // metric label
}

func (s *Server) handleTrack(w http.ResponseWriter, r *http.Request) {
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
	var err error
	dec := s.decoders.Get().(*decodeState)
	defer s.decoders.Put(dec)
	dec.recs, err = record.Split(tr.body, tr.ndjson, s.limits, dec.recs[:0])
	if err == nil && len(dec.recs) == 0 {
		err = fmt.Errorf("%w: the request contains no records", errBadBody)
	}
	if err != nil {
		s.trackRejected(w, tr.verbose, err)
		return
	}
	total := len(dec.recs)
	groups, failures := groupByToken(dec.recs, tr.ip, s.auth.ProjectByToken)
	groups, failures = refuseOrigins(w, r, groups, failures, func(g *trackGroup) *config.Project { return g.project },
		func(g *trackGroup, fails []record.Failure, msg string) []record.Failure {
			for _, i := range g.idx {
				fails = append(fails, record.Failure{Index: i, Field: "properties.token", Message: "'properties.token' is invalid: " + msg})
			}
			return fails
		})
	for _, f := range failures {
		s.met.rejected.Add(1, "unknown", failureReason(f.Field))
	}
	// Residency and rate limits are checked for every project before
	// anything is decoded or stored, so a refused request stores nothing.
	for _, g := range groups {
		if g.project.Region != s.cfg.Region {
			writeTrackError(w, http.StatusForbidden, residencyMessage(g.project, s.cfg.Region))
			return
		}
	}
	for _, g := range groups {
		if !s.limiter.Allow(r.Context(), g.project.ID, g.bytes, int64(g.project.RateLimit.BytesPerMinute)) {
			s.met.rejected.Add(1, strconv.FormatInt(g.project.ID, 10), "rate_limited")
			writeTrackError(w, http.StatusTooManyRequests, "Project exceeded rate limits. Please retry the request with exponential backoff.")
			return
		}
	}

	// Each project gets its own decoder: Props point into the decoder's
	// arena, so all batches must stay alive until every commit is done.
	now := s.now()
	parts := make([]trackProject, 0, len(groups))
	defer func() {
		for _, p := range parts {
			s.decoders.Put(p.dec)
		}
	}()
	for _, g := range groups {
		pd := s.decoders.Get().(*decodeState)
		pd.batch = store.Batch{Source: store.SourceTrack, Events: pd.batch.Events[:0], Merges: pd.batch.Merges[:0], Changes: pd.batch.Changes[:0]}
		// AllowMerge is false: decisions.md admits $merge only on /import
		// with a secret, service account or OAuth, never by token alone.
		fails := pd.d.Decode(record.Options{
			Project: g.project.ID, Token: g.project.Token, AllowMerge: false, Strict: false, Now: now,
			Mode: g.project.IDMode(),
		}, g.recs, &pd.batch)
		part := trackProject{group: g, dec: pd, project: strconv.FormatInt(g.project.ID, 10)}
		part.tooOld = dropOldWithChanges(&pd.batch, now.Add(-trackMaxAge).UnixMilli())
		for _, f := range fails {
			s.met.rejected.Add(1, part.project, failureReason(f.Field))
			f.Index = g.idx[f.Index]
			failures = append(failures, f)
		}
		if part.tooOld > 0 {
			s.met.trackTooOld.Add(int64(part.tooOld), part.project)
		}
		parts = append(parts, part)
	}
	for i, p := range parts {
		if len(p.dec.batch.Events) == 0 {
			continue
		}
		res, err := s.commit(r.Context(), p.dec.batch)
		if err != nil {
			s.log.Error("track commit failed", "project", p.group.project.ID, "records", len(p.dec.batch.Events), "err", err)
			msg := "the events could not be stored; nothing from this request was accepted, retry"
			if i > 0 { // earlier projects' events are durable; a retry deduplicates those with $insert_id
				msg = fmt.Sprintf("the events of project %d could not be stored; retry", p.group.project.ID)
			}
			writeTrackError(w, http.StatusServiceUnavailable, msg)
			return
		}
		rej := rejectionFailures(&p.dec.batch, res.Rejected, p.group.idx)
		for _, f := range rej {
			s.met.rejected.Add(1, p.project, failureReason(f.Field))
		}
		failures = append(failures, rej...)
		s.met.accepted.Add(int64(len(p.dec.batch.Events)-len(rej)), p.project)
	}
	// Events dropped as too old count as valid: the public docs answer 1
	// for them, and a client must not retry them forever.
	valid := total - len(failures)
	msg := ""
	if len(failures) > 0 {
		slices.SortFunc(failures, func(a, b record.Failure) int { return a.Index - b.Index })
		f := failures[0]
		msg = fmt.Sprintf("%d of %d records failed validation; first: record %d: %s", len(failures), total, f.Index, f.Message)
	}
	writeLegacy(w, tr.verbose, valid > 0, msg)
}

// trackRejected answers a request refused as a whole; nothing was stored.
// Only size limits get an HTTP error: everything else is the legacy 0 that
// tracking SDKs understand.
func (s *Server) trackRejected(w http.ResponseWriter, verbose bool, err error) {
	if errors.Is(err, errTooLarge) || errors.Is(err, record.ErrTooManyRecords) || errors.Is(err, record.ErrEventTooLarge) {
		s.met.rejected.Add(1, "unknown", "too_large")
		writeTrackError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	s.met.rejected.Add(1, "unknown", "malformed")
	writeLegacy(w, verbose, false, err.Error())
}

func residencyMessage(p *config.Project, server config.Region) string {
	return fmt.Sprintf("project %d is enrolled in %s data residency; send its requests to the %s host (this server is %s)",
		p.ID, regionName(p.Region), p.Region.Host(), server.Host())
}
