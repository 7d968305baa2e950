package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// Public /import limits (decisions.md): on uncompressed bytes.
const (
	maxBodyBytes = 10 << 20
)

var importAuth = auth.Allowed{Secret: true, Token: true, ServiceAccount: true, OAuth: true}

// importMode says how the request wants to be validated and answered.
//
// A JSON body is answered with the JSON bodies whatever strict says
// (mixpanel-go and mixpanel-import decode num_records_imported from
// both); strict=0 only relaxes validation, and its 200 also lists what
// failed. A form body (data=, in the body or the query; the Node SDK's
// import() sends GET /import?data=…) is answered 1/0 as the legacy SDKs
// expect, unless it asks for strict=1.
type importMode struct {
	strict  bool // strict validation (lenient: coerce where possible)
	legacy  bool // answer 1/0 or {"status","error"}
	form    bool // data= parameter instead of a raw body
	verbose bool
	ndjson  bool
}

func modeOf(r *http.Request) importMode {
	q := r.URL.Query()
	m := importMode{ndjson: isNDJSON(r)}
	m.form = isForm(r) || r.Method == http.MethodGet || (r.ContentLength == 0 && q.Get("data") != "")
	m.verbose = q.Get("verbose") == "1"
	m.strict = q.Get("strict") != "0" && !m.form
	m.legacy = m.form && !m.strict
	return m
}

// asForm switches a request whose body turned out to be form-encoded
// (text/plain as sendBeacon sends it, or no Content-Type) to the form
// mode, as if it had said so.
func (m *importMode) asForm() {
	m.form, m.ndjson, m.strict, m.legacy = true, false, false, true
}

func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use POST, or GET with the data= parameter")
		return
	}
	if crossSiteBrowser(r) {
		// Its credentials can only be ones the browser re-sends on its own
		// (a page's script cannot set Authorization cross-origin without a
		// preflight, which /import never grants): an <img src="/import?data=…">
		// or a form on another site must not write with them.
		writeError(w, http.StatusForbidden, "/import does not take requests a browser sends from another site: it needs a secret or a service account, which belong on a server; browsers send events to /track with the project token")
		return
	}
	p, ok := s.authorize(w, r, importAuth, true)
	if !ok {
		return
	}
	mode := modeOf(r)
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer s.bufs.Put(buf)

	if err := readBody(r, buf, maxBodyBytes); err != nil {
		s.importRejected(w, mode, p, err)
		return
	}
	body := buf.Bytes()
	if !mode.form && formBody(body) {
		mode.asForm()
	}
	if mode.form {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			s.importRejected(w, mode, p, fmt.Errorf("%w: malformed form body: %v", errBadBody, err))
			return
		}
		if form.Get("verbose") == "1" {
			mode.verbose = true
		}
		if form.Get("strict") == "1" { // an explicit request for strict answers wins
			mode.strict, mode.legacy = true, false
		}
		data, err := legacyData(form, r.URL.Query())
		if err != nil {
			s.importRejected(w, mode, p, err)
			return
		}
		body = data
	}
	if !s.limiter.Allow(r.Context(), p.Project.ID, int64(len(body)), int64(p.Project.RateLimit.BytesPerMinute)) {
		s.met.rejected.Add(1, strconv.FormatInt(p.Project.ID, 10), "rate_limited")
		writeError(w, http.StatusTooManyRequests, "Project exceeded rate limits. Please retry the request with exponential backoff.")
		return
	}

	dec := s.decoders.Get().(*decodeState)
	defer s.decoders.Put(dec)
	var err error
	dec.recs, err = record.Split(body, mode.ndjson, s.limits, dec.recs[:0])
	if err != nil {
		s.importRejected(w, mode, p, err)
		return
	}
	if len(dec.recs) == 0 {
		s.importRejected(w, mode, p, fmt.Errorf("%w: the request contains no records", errBadBody))
		return
	}
	dec.batch = store.Batch{Source: store.SourceImport, Events: dec.batch.Events[:0], Merges: dec.batch.Merges[:0], Changes: dec.batch.Changes[:0]}
	failures := dec.d.Decode(record.Options{
		Project:    p.Project.ID,
		Token:      p.Project.Token,
		AllowMerge: p.Method != auth.ProjectToken,
		Strict:     mode.strict,
		Now:        s.now(),
		Mode:       p.Project.IDMode(),
	}, dec.recs, &dec.batch)
	accepted := len(dec.batch.Events) + len(dec.batch.Merges)
	project := strconv.FormatInt(p.Project.ID, 10)
	for _, f := range failures {
		s.met.rejected.Add(1, project, failureReason(f.Field))
	}
	if accepted > 0 {
		res, err := s.commit(r.Context(), dec.batch)
		if err != nil {
			s.log.Error("import commit failed", "project", p.Project.ID, "records", accepted, "err", err)
			writeError(w, http.StatusServiceUnavailable, "the records could not be stored; nothing from this request was accepted, retry")
			return
		}
		if rej := rejectionFailures(&dec.batch, res.Rejected, nil); len(rej) > 0 {
			for _, f := range rej {
				s.met.rejected.Add(1, project, failureReason(f.Field))
			}
			accepted -= len(rej)
			failures = append(failures, rej...)
			slices.SortFunc(failures, func(a, b record.Failure) int { return a.Index - b.Index })
		}
		s.met.accepted.Add(int64(accepted), project)
	}
	switch {
	case mode.legacy:
		msg := ""
		if len(failures) > 0 {
			msg = fmt.Sprintf("%d of %d records failed validation; first: %s: %s", len(failures), len(dec.recs), failures[0].Field, failures[0].Message)
		}
		writeLegacy(w, mode.verbose, accepted > 0, msg)
	case len(failures) == 0:
		writeJSON(w, http.StatusOK, strictOK{Code: 200, Imported: accepted, Status: "OK"})
	case !mode.strict:
		writeJSON(w, http.StatusOK, lenientOK{Code: 200, Imported: accepted, Status: "OK", Failed: failures})
	default:
		writeJSON(w, http.StatusBadRequest, strictInvalid{
			Code: 400, Error: "some data points in the request failed validation", Status: "Bad Request",
			Imported: accepted, Failed: failures,
		})
	}
}

// importRejected answers a request refused as a whole; nothing was stored.
func (s *Server) importRejected(w http.ResponseWriter, mode importMode, p auth.Principal, err error) {
	status := http.StatusBadRequest
	reason := "malformed"
	switch {
	case errors.Is(err, errTooLarge), errors.Is(err, record.ErrTooManyRecords), errors.Is(err, record.ErrEventTooLarge):
		status, reason = http.StatusRequestEntityTooLarge, "too_large"
	}
	s.met.rejected.Add(1, strconv.FormatInt(p.Project.ID, 10), reason)
	if mode.legacy && status == http.StatusBadRequest {
		writeLegacy(w, mode.verbose, false, err.Error())
		return
	}
	writeError(w, status, err.Error())
}

// commit hands the batch to the group committer and records its latency.
func (s *Server) commit(ctx context.Context, b store.Batch) (store.WriteResult, error) {
	start := time.Now()
	res, err := s.committer.Commit(ctx, b)
	s.met.commitWait.Observe(time.Since(start))
	return res, err
}

// failureReason turns a failed field into a metric label. Property names
// come from clients, so they must never become label values: a client could
// otherwise mint unbounded series.
func failureReason(field string) string {
	switch {
	case field == "":
		return "malformed_record"
	case field == "event", field == "properties", field == "properties.time", field == "properties.distinct_id",
		field == "properties.$insert_id", field == "properties.token", field == "properties.$distinct_ids":
		return field
	case strings.HasPrefix(field, "properties."):
		return "properties.other"
	}
	return "unknown_field"
}
