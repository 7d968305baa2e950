package api

import (
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/valyala/fastjson"
)

// trackGroup is the records of one /track request that carry one
// project's token. /track has no request-level credentials: each event
// names its project with properties.token, so one request may feed several.
type trackGroup struct {
	project *config.Project
	idx     []int // request index of each record, for failure messages
	recs    [][]byte
	bytes   int64 // charged to the project's rate limit
}

const (
	msgTrackNoToken  = "'properties.token' is invalid: /track needs the project token in properties.token"
	msgTrackBadToken = "'properties.token' is invalid: not the token of any project on this server"
)

var trackParsers fastjson.ParserPool

// groupByToken sorts records by the project their properties.token names.
// A record without a known token fails here (field properties.token): it
// has no project to be validated or stored under. With ip != "" (ip=1) an
// event without a distinct_id gets the request IP as its distinct_id, as
// the public HTTP spec describes.
func groupByToken(recs [][]byte, ip string, lookup func(string) (*config.Project, bool)) ([]*trackGroup, []record.Failure) {
	p := trackParsers.Get()
	defer trackParsers.Put(p)
	var (
		groups []*trackGroup
		fails  []record.Failure
		arena  fastjson.Arena
	)
	for i, rec := range recs {
		v, err := p.ParseBytes(rec)
		if err != nil {
			fails = append(fails, record.Failure{Index: i, Message: "invalid JSON: " + err.Error()})
			continue
		}
		props := v.Get("properties")
		tok := props.Get("token")
		if tok == nil || tok.Type() != fastjson.TypeString || len(tok.GetStringBytes()) == 0 {
			fails = append(fails, failure(i, v, msgTrackNoToken))
			continue
		}
		proj, ok := lookup(string(tok.GetStringBytes()))
		if !ok {
			fails = append(fails, failure(i, v, msgTrackBadToken))
			continue
		}
		if ip != "" && props.Type() == fastjson.TypeObject && absent(props.Get("distinct_id")) && absent(props.Get("$distinct_id")) {
			arena.Reset()
			props.Set("distinct_id", arena.NewString(ip))
			rec = v.MarshalTo(nil) // a fresh slice: rec must outlive the parser
		}
		var g *trackGroup
		for _, c := range groups {
			if c.project == proj {
				g = c
				break
			}
		}
		if g == nil {
			g = &trackGroup{project: proj}
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
		g.recs = append(g.recs, rec)
		g.bytes += int64(len(rec))
	}
	return groups, fails
}

func absent(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

func failure(i int, v *fastjson.Value, msg string) record.Failure {
	f := record.Failure{Index: i, Field: "properties.token", Message: msg}
	if id := v.Get("properties", "$insert_id"); id != nil && id.Type() == fastjson.TypeString && len(id.GetStringBytes()) <= 36 {
		f.InsertID = string(id.GetStringBytes())
	}
	return f
}
