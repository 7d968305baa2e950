package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/valyala/fastjson"
)

// FuzzSplitDecode feeds arbitrary bodies through Split and Decode and checks
// the invariants the HTTP and storage layers rely on.
func FuzzSplitDecode(f *testing.F) {
	f.Add([]byte(`[`+ev(`"$insert_id":"a-1","o":{"k":[1,"x"]}`)+`,{"event":"e"}]`), false, true, true)
	f.Add([]byte(mergeRec(`"$distinct_ids":["a","b"],"token":"tok123"`)+"\n"+ev("")), true, false, true)
	f.Add([]byte(`{"event":"e","properties":{"time":"1748736000","distinct_id":7,"s":"\ud800\u00e9\""}}`), false, false, false)
	f.Fuzz(func(t *testing.T, body []byte, ndjson, strict, allowMerge bool) {
		lim := Limits{MaxRecords: 50, MaxEventBytes: 4096}
		recs, err := Split(body, ndjson, lim, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooManyRecords) && !errors.Is(err, ErrEventTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if len(recs) > lim.MaxRecords {
			t.Fatalf("%d records", len(recs))
		}
		for _, r := range recs {
			if len(r) > lim.MaxEventBytes || len(r) == 0 {
				t.Fatalf("record of %d bytes", len(r))
			}
		}
		opt := Options{Project: 1, Token: "tok123", AllowMerge: allowMerge, Strict: strict, Now: now}
		var d Decoder
		var b store.Batch
		fails := d.Decode(opt, recs, &b)
		checkOutcome(t, opt, recs, &b, fails)
		checkAgainstStdlib(t, opt, recs, &b, fails)

		// Reusing the Decoder gives the same result.
		keep := make([]string, len(b.Events))
		for i, e := range b.Events {
			keep[i] = string(e.Props)
		}
		var b2 store.Batch
		fails2 := d.Decode(opt, recs, &b2)
		if len(fails2) != len(fails) || len(b2.Events) != len(b.Events) {
			t.Fatalf("second decode differs")
		}
		for i, e := range b2.Events {
			p := b.Events[i]
			if string(e.Props) != keep[i] || e.Name != p.Name || e.DistinctID != p.DistinctID ||
				e.TimeMs != p.TimeMs || e.InsertID != p.InsertID || e.Key != p.Key {
				t.Fatalf("second decode differs at %d", i)
			}
		}
	})
}

func checkOutcome(t *testing.T, opt Options, recs [][]byte, b *store.Batch, fails []Failure) {
	t.Helper()
	if n := len(b.Events) + len(b.Merges) + len(fails); n != len(recs) {
		t.Fatalf("%d records gave %d outcomes", len(recs), n)
	}
	for i, f := range fails {
		if f.Index < 0 || f.Index >= len(recs) || (i > 0 && f.Index <= fails[i-1].Index) {
			t.Fatalf("failure index %d out of order", f.Index)
		}
		for _, s := range []string{f.Field, f.Message, f.InsertID} {
			if !utf8.ValidString(s) {
				t.Fatalf("failure text is not UTF-8: %+v", f)
			}
		}
		if f.Message == "" || utf8.RuneCountInString(f.InsertID) > maxRunes {
			t.Fatalf("bad failure %+v", f)
		}
	}
	nowMs := opt.Now.UnixMilli()
	for _, e := range b.Events {
		checkProps(t, e.Props)
		checkText(t, e.Name)
		checkText(t, e.DistinctID)
		if e.Name == "" || e.TimeMs < minTimeMs || e.TimeMs > nowMs+maxAheadMs || e.IngestMs != nowMs {
			t.Fatalf("bad event %+v", e)
		}
		if e.InsertID != "" && (!ValidInsertID(e.InsertID) || e.Key != store.DedupKey(opt.Project, e.Name, e.DistinctID, e.TimeMs, e.InsertID)) {
			t.Fatalf("bad insert id / key %+v", e)
		}
		if opt.Strict {
			v := fastjson.MustParseBytes(e.Props)
			if v.Exists("time") || v.Exists("distinct_id") || v.Exists("$insert_id") {
				t.Fatalf("reserved key left in props %s", e.Props)
			}
		}
	}
	for _, m := range b.Merges {
		checkProps(t, m.Props)
		if !opt.AllowMerge || m.DistinctIDs[0] == "" || m.DistinctIDs[1] == "" {
			t.Fatalf("bad merge %+v", m)
		}
		checkText(t, m.DistinctIDs[0])
		checkText(t, m.DistinctIDs[1])
	}
}

// checkProps: a strict JSON object, every string valid and ≤255 runes.
func checkProps(t *testing.T, p []byte) {
	t.Helper()
	if !json.Valid(p) {
		t.Fatalf("props are not valid JSON: %q", p)
	}
	v, err := fastjson.ParseBytes(p)
	if err != nil || v.Type() != fastjson.TypeObject {
		t.Fatalf("props are not a JSON object: %q", p)
	}
	var walk func(v *fastjson.Value, depth int)
	walk = func(v *fastjson.Value, depth int) {
		switch v.Type() {
		case fastjson.TypeString:
			checkText(t, string(v.GetStringBytes()))
		case fastjson.TypeObject:
			o, _ := v.Object()
			if depth > maxDepth || o.Len() > maxMembers {
				t.Fatalf("limits broken in %s", p)
			}
			o.Visit(func(k []byte, c *fastjson.Value) {
				checkText(t, string(k))
				walk(c, depth+1)
			})
		case fastjson.TypeArray:
			a, _ := v.Array()
			if depth > maxDepth || len(a) > maxMembers {
				t.Fatalf("limits broken in %s", p)
			}
			for _, c := range a {
				walk(c, depth+1)
			}
		}
	}
	walk(v, 0)
	if bytes.Contains(p, []byte{0xff}) {
		t.Fatalf("marker byte leaked: %q", p)
	}
}

func checkText(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxRunes {
		t.Fatalf("bad string (%d runes): %q", utf8.RuneCountInString(s), s)
	}
}

// checkAgainstStdlib compares with encoding/json, the reference: the scanner
// must accept exactly the records json.Valid accepts, and an accepted short
// strict event (no truncation possible) must keep every property unchanged.
// Each record is also decoded alone, which must give the same outcome as in
// the batch: records are independent.
func checkAgainstStdlib(t *testing.T, opt Options, recs [][]byte, b *store.Batch, fails []Failure) {
	t.Helper()
	var d Decoder
	nf, ne, nm := 0, 0, 0
	for i, r := range recs {
		var s scanner
		err := s.scan(r)
		if ok := err == nil; ok != json.Valid(r) && !strings.Contains(fmt.Sprint(err), "nesting deeper") {
			t.Fatalf("scanner says valid=%v, encoding/json disagrees: %q", ok, r)
		}
		var one store.Batch
		f := d.Decode(opt, recs[i:i+1], &one)
		switch {
		case len(f) == 1:
			if nf >= len(fails) || fails[nf].Index != i || fails[nf].Field != f[0].Field || fails[nf].Message != f[0].Message {
				t.Fatalf("record %d fails alone (%+v) but not in the batch", i, f[0])
			}
			nf++
			continue
		case len(one.Merges) == 1:
			nm++
			continue
		}
		if !json.Valid(r) {
			t.Fatalf("invalid JSON accepted: %q", r)
		}
		e := b.Events[ne]
		ne++
		if string(e.Props) != string(one.Events[0].Props) || e.Name != one.Events[0].Name {
			t.Fatalf("record %d decodes differently alone", i)
		}
		if !opt.Strict || len(r) > maxRunes {
			continue
		}
		var rec struct{ Properties map[string]any }
		var got map[string]any
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.UseNumber()
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		dec = json.NewDecoder(bytes.NewReader(e.Props))
		dec.UseNumber()
		if err := dec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		delete(rec.Properties, "time")
		delete(rec.Properties, "distinct_id")
		delete(rec.Properties, "$insert_id")
		if !reflect.DeepEqual(rec.Properties, got) {
			t.Fatalf("props changed:\n in  %q\n out %s", r, e.Props)
		}
	}
	if nf != len(fails) || ne != len(b.Events) || nm != len(b.Merges) {
		t.Fatalf("batch and single decodes disagree")
	}
}
