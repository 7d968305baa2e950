package record

import (
	"testing"
)

func mergeRec(props string) string { return `{"event":"$merge","properties":{` + props + `}}` }

func TestMergeValid(t *testing.T) {
	rec := mergeRec(`"$distinct_ids":["a","b"],"token":"tok123","$insert_id":"m1","note":"x"`)
	b, fails := decode(t, strictOpts(), rec)
	if len(fails) > 0 || len(b.Merges) != 1 || len(b.Events) != 0 {
		t.Fatalf("got %+v %+v", b, fails)
	}
	m := b.Merges[0]
	if m.DistinctIDs != [2]string{"a", "b"} || m.TimeMs != now.UnixMilli() || m.IngestMs != now.UnixMilli() {
		t.Errorf("got %+v", m)
	}
	// Props are the normalised properties minus $distinct_ids and token.
	if string(m.Props) != `{"$insert_id":"m1","note":"x"}` {
		t.Errorf("props %s", m.Props)
	}
	// An explicit time follows the event rules.
	b, _ = decode(t, strictOpts(), mergeRec(`"time":1748736000123,"$distinct_ids":["a","b"],"token":"tok123"`))
	if len(b.Merges) != 1 || b.Merges[0].TimeMs != nowS*1000+123 || string(b.Merges[0].Props) != `{"time":1748736000123}` {
		t.Errorf("got %+v", b.Merges)
	}
	// Lenient mode accepts the same merge.
	if b, _ := decode(t, lenientOpts(), rec); len(b.Merges) != 1 {
		t.Errorf("lenient merge refused")
	}
	// Without a token (the Go SDK's Merge): the credential that allowed
	// the merge names the project.
	for _, opt := range []Options{strictOpts(), lenientOpts()} {
		b, fails := decode(t, opt, mergeRec(`"$distinct_ids":["a","b"]`))
		if len(fails) > 0 || len(b.Merges) != 1 || b.Merges[0].DistinctIDs != [2]string{"a", "b"} || string(b.Merges[0].Props) != `{}` {
			t.Errorf("token-less merge (strict %v): %+v %+v", opt.Strict, b.Merges, fails)
		}
	}
}

func TestMergeFailures(t *testing.T) {
	const (
		ids = `"$distinct_ids":["a","b"]`
		tok = `"token":"tok123"`
	)
	noMerge := strictOpts()
	noMerge.AllowMerge = false
	noToken := strictOpts()
	noToken.Token = ""
	tests := []struct {
		name  string
		opt   Options
		rec   string
		field string
		msg   string
	}{
		{"project token auth", noMerge, mergeRec(ids + "," + tok), "event", msgMergeAuth},
		{"project token auth lenient", func() Options { o := noMerge; o.Strict = false; return o }(), mergeRec(ids + "," + tok), "event", msgMergeAuth},
		{"ids missing", strictOpts(), mergeRec(tok), "properties.$distinct_ids", msgDistinctIDs},
		{"ids not array", strictOpts(), mergeRec(`"$distinct_ids":"a",` + tok), "properties.$distinct_ids", msgDistinctIDs},
		{"one id", strictOpts(), mergeRec(`"$distinct_ids":["a"],` + tok), "properties.$distinct_ids", msgDistinctIDs},
		{"three ids", strictOpts(), mergeRec(`"$distinct_ids":["a","b","c"],` + tok), "properties.$distinct_ids", msgDistinctIDs},
		{"number id", strictOpts(), mergeRec(`"$distinct_ids":["a",2],` + tok), "properties.$distinct_ids", msgDistinctIDs},
		{"empty id", strictOpts(), mergeRec(`"$distinct_ids":["a",""],` + tok), "properties.$distinct_ids", msgDistinctIDs},
		{"bad utf8 id", strictOpts(), mergeRec(`"$distinct_ids":["a","` + "\xff" + `"],` + tok),
			"properties.$distinct_ids", "properties.$distinct_ids is invalid: string should be valid utf8"},
		{"token wrong", strictOpts(), mergeRec(ids + `,"token":"tok124"`), "properties.token", msgToken},
		{"token prefix", strictOpts(), mergeRec(ids + `,"token":"tok12"`), "properties.token", msgToken},
		{"token number", strictOpts(), mergeRec(ids + `,"token":123`), "properties.token", msgToken},
		{"token null", strictOpts(), mergeRec(ids + `,"token":null`), "properties.token", msgToken},
		{"token-less with token auth", noMerge, mergeRec(ids), "event", msgMergeAuth},
		{"project has no token", noToken, mergeRec(ids + `,"token":""`), "properties.token", msgToken},
		{"bad time", strictOpts(), mergeRec(ids + "," + tok + `,"time":"x"`), "properties.time", msgTimeWant},
		{"future time", strictOpts(), mergeRec(ids + "," + tok + `,"time":1748739601`), "properties.time", msgFutureWant + " (1h0m1s ahead)"},
		{"unknown top-level key", strictOpts(), `{"event":"$merge","properties":{` + ids + "," + tok + `},"x":1}`,
			"x", `'x' is not a valid field: a record has only "event" and "properties"`},
		{"deep prop", strictOpts(), mergeRec(ids + "," + tok + `,"d":` + nest(4, "1")),
			"properties.d", "'properties.d' is invalid: nesting depth must be at most 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustFail(t, tc.opt, tc.rec)
			if f.Field != tc.field || f.Message != tc.msg {
				t.Errorf("got field %q message %q\nwant field %q message %q", f.Field, f.Message, tc.field, tc.msg)
			}
		})
	}
}
