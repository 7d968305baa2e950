package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/enrich"
	"github.com/tributary-dev/tributary/ingest/profile"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/where"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// engagePageSize is the public API's fixed page size.
const engagePageSize = 1000

// engageQuery is a parsed profile query.
type engageQuery struct {
	kind     profile.Kind
	groupKey string   // data_group_id: group profiles of this key
	ids      []string // requested ids, as given
	byID     bool     // distinct_id or distinct_ids was given (maybe empty)
	where    *where.Expr
	output   []string // output_properties; nil: every property
	page     int
	session  string
}

// unsupportedEngage are documented parameters that select profiles by
// behaviour or cohort, which Tributary does not compute; ignoring them
// would return every profile instead of the intended few.
var unsupportedEngage = []string{"behaviors", "filter_by_cohort", "as_of_timestamp"}

func parseEngage(q url.Values) (engageQuery, error) {
	eq := engageQuery{kind: profile.User}
	for _, name := range unsupportedEngage {
		if q.Has(name) {
			return eq, fmt.Errorf("%s is not supported; filter with where instead", name)
		}
	}
	if g := q.Get("data_group_id"); g != "" {
		eq.kind, eq.groupKey = profile.Group, g
	}
	if id := q.Get("distinct_id"); id != "" {
		eq.byID, eq.ids = true, append(eq.ids, id)
	}
	if raw := q.Get("distinct_ids"); raw != "" {
		var ids []string
		if err := json.Unmarshal([]byte(raw), &ids); err != nil {
			return eq, fmt.Errorf(`distinct_ids must be a JSON array of strings, e.g. ["id1","id2"]`)
		}
		eq.byID, eq.ids = true, append(eq.ids, ids...)
	}
	var err error
	if eq.where, err = parseWhere("where", q.Get("where")); err != nil {
		return eq, err
	}
	if raw := q.Get("output_properties"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &eq.output); err != nil || eq.output == nil {
			return eq, fmt.Errorf(`output_properties must be a JSON array of strings, e.g. ["$email","plan"]`)
		}
	}
	if v := q.Get("page"); v != "" {
		if eq.page, err = strconv.Atoi(v); err != nil || eq.page < 0 {
			return eq, fmt.Errorf("page must be an integer of at least 0, got %q", v)
		}
	}
	eq.session = q.Get("session_id")
	if eq.page > 0 && eq.session == "" {
		return eq, errors.New("page above 0 needs the session_id of the first page's response")
	}
	return eq, nil
}

// sessionID identifies a query statelessly: a digest of everything that
// selects and shapes its results. Paging is deterministic because profiles
// are scanned in id order and page n is the n-th run of 1000 matches, so
// no server-side cursor has to survive between requests; profiles written
// between two page requests can shift later pages, as in the public API.
func (eq *engageQuery) sessionID(project int64) string {
	h := sha256.New()
	fmt.Fprintf(h, "v1\x00%d\x00%d\x00%s\x00%t\x00%q\x00%s\x00%q", project, eq.kind, eq.groupKey,
		eq.byID, eq.ids, eq.where.String(), eq.output)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:15])
}

func (s *Server) handleEngageQuery(w http.ResponseWriter, r *http.Request) {
	p, q, ok := s.queryParams(w, r, http.MethodGet, http.MethodPost)
	if !ok {
		return
	}
	eq, err := parseEngage(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	project := p.Project.ID
	session := eq.sessionID(project)
	if eq.session != "" && eq.session != session {
		writeError(w, http.StatusBadRequest, "session_id belongs to a different query; start again at page 0 without it")
		return
	}
	scan := store.ProfileScan{Project: project, Kind: eq.kind, GroupKey: eq.groupKey}
	if eq.byID {
		if scan.IDs, err = s.canonicalIDs(r, project, &eq); err != nil {
			s.answerReadError(w, r, "profile query", project, err)
			return
		}
	}
	var ap *enrich.Applier
	if eq.kind == profile.User {
		if ap, err = s.enrich.For(r.Context(), p.Project, enrich.Users); err != nil {
			s.answerReadError(w, r, "profile query", project, err)
			return
		}
	}
	out := engageHead(nil, eq.page, session)
	total, err := s.engageResults(r, scan, &eq, ap, &out)
	if err != nil {
		s.answerReadError(w, r, "profile query", project, err)
		return
	}
	out = append(out, `],"total":`...)
	out = append(jsonw.Int(out, int64(total)), "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// canonicalIDs resolves requested user ids through identity merge, so a
// merged-away id finds the profile now kept under its canonical id. Group
// ids are taken as they are.
func (s *Server) canonicalIDs(r *http.Request, project int64, eq *engageQuery) ([]string, error) {
	ids := make([]string, 0, len(eq.ids))
	for _, id := range eq.ids {
		if eq.kind == profile.User {
			c, err := s.store.Resolve(r.Context(), project, id)
			if err != nil {
				return nil, fmt.Errorf("resolve %q: %w", id, err)
			}
			id = c
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func engageHead(dst []byte, page int, session string) []byte {
	dst = append(dst, `{"page":`...)
	dst = jsonw.Int(dst, int64(page))
	dst = append(dst, `,"page_size":`...)
	dst = jsonw.Int(dst, engagePageSize)
	dst = append(dst, `,"session_id":`...)
	dst = jsonw.String(dst, session)
	return append(dst, `,"status":"ok","results":[`...)
}

// engageResults appends the requested page's results to *out and returns
// how many profiles match in all.
func (s *Server) engageResults(r *http.Request, scan store.ProfileScan, eq *engageQuery, ap *enrich.Applier, out *[]byte) (int, error) {
	if eq.byID && len(scan.IDs) == 0 {
		return 0, nil // distinct_ids=[]: no profile, not every profile
	}
	var (
		parser fastjson.Parser
		total  int
		first  = eq.page * engagePageSize
	)
	err := s.store.ScanProfiles(r.Context(), scan, func(sp *store.StoredProfile) error {
		props := ap.Apply(sp.Props)
		var obj *fastjson.Object
		if eq.where != nil || eq.output != nil {
			v, err := parser.ParseBytes(props)
			if err != nil {
				return fmt.Errorf("profile %q: stored properties: %w", sp.ID, err)
			}
			obj, _ = v.Object()
			if !eq.where.Match(where.JSON{V: v}) {
				return nil
			}
		}
		total++
		if total <= first || total > first+engagePageSize {
			return nil
		}
		if total > first+1 {
			*out = append(*out, ',')
		}
		*out = append(*out, `{"$distinct_id":`...)
		*out = jsonw.String(*out, sp.ID)
		*out = append(*out, `,"$properties":`...)
		if eq.output != nil {
			*out = appendSelected(*out, obj, eq.output)
		} else {
			*out = append(*out, props...)
		}
		*out = append(*out, '}')
		return nil
	})
	return total, err
}

// appendSelected writes the members of obj named in names, in stored order.
func appendSelected(dst []byte, obj *fastjson.Object, names []string) []byte {
	dst = append(dst, '{')
	n := 0
	if obj != nil {
		obj.Visit(func(k []byte, v *fastjson.Value) {
			if !slices.Contains(names, string(k)) {
				return
			}
			if n++; n > 1 {
				dst = append(dst, ',')
			}
			dst = v.MarshalTo(append(jsonw.String(dst, string(k)), ':'))
		})
	}
	return append(dst, '}')
}
