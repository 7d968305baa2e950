package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// oracleJSONText is the flattener flattenJSON replaced (fastjson parse,
// visit, re-encode), kept as the oracle: the new one must write the same
// bytes, because $insert_id hashes them.
func (m *Mapper) oracleJSONText(p *fastjson.Parser, dst []byte, text, prefix string) []byte {
	doc, err := p.Parse(text)
	if err != nil || doc.Type() != fastjson.TypeObject {
		if prefix == "" {
			m.badJSON = true
			return dst
		}
		if m.claim([]byte(prefix)) {
			dst = m.oracleKeyBytes(dst, []byte(prefix))
			dst = jsonw.String(dst, text)
		}
		return dst
	}
	return m.oracleFlattenObject(dst, doc.GetObject(), prefix)
}

func (m *Mapper) oracleKeyBytes(dst, name []byte) []byte {
	if m.comma {
		dst = append(dst, ',')
	}
	m.comma = true
	dst = jsonw.String(dst, b2s(name))
	return append(dst, ':')
}

func (m *Mapper) oracleFlattenObject(dst []byte, o *fastjson.Object, prefix string) []byte {
	o.Visit(func(k []byte, val *fastjson.Value) {
		mark := len(m.scratch)
		if prefix != "" {
			m.scratch = append(m.scratch, prefix...)
			m.scratch = append(m.scratch, '.')
		}
		m.scratch = append(m.scratch, k...)
		name := m.scratch[mark:]
		switch {
		case val.Type() == fastjson.TypeNull:
		case val.Type() == fastjson.TypeObject && val.GetObject().Len() > 0:
			dst = m.oracleFlattenObject(dst, val.GetObject(), b2s(name))
		case m.claim(name):
			dst = m.oracleKeyBytes(dst, name)
			dst = val.MarshalTo(dst)
		}
		m.scratch = m.scratch[:mark]
	})
	return dst
}

// flatResult is everything one row's flattening leaves behind.
type flatResult struct {
	out   string
	bad   bool
	comma bool
	names []string
}

// flatMappers are reused across comparisons (New per call would make the
// fuzzer crawl); index 1 runs the oracle. Tests here are not parallel.
var flatMappers [2]*Mapper

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// flattenRow runs docs through one implementation as the dynamic values
// of one row (so earlier documents' names block later ones).
func flattenRow(tb testing.TB, oracle bool, prefix string, comma bool, docs ...string) flatResult {
	m := flatMappers[0]
	if oracle {
		m = flatMappers[1]
	}
	if m == nil {
		m = benchMapper(tb)
		flatMappers[b2i(oracle)] = m
	}
	var p fastjson.Parser
	m.resetDyn()
	m.scratch, m.badJSON = m.scratch[:0], false
	m.comma = comma
	dst := []byte("HEAD")
	m.clean, m.members = true, 0
	for _, d := range docs {
		if oracle {
			dst = m.oracleJSONText(&p, dst, d, prefix)
		} else {
			dst = m.appendJSONText(dst, d, prefix)
		}
	}
	if !oracle && m.clean && !m.badJSON {
		// What the flattener vouches for, the validator's scan confirms.
		if n, ok := record.CleanMembers(dst[4:]); !ok || n != m.members {
			tb.Fatalf("docs %q: vouched for %d members, the scan says %d, %v: %s", docs, m.members, n, ok, dst[4:])
		}
	}
	// A few more names: the row's claims must match too (rollback).
	for k := 0; k < 40; k++ {
		n := fmt.Sprintf("z%d", k%37)
		if k%2 == 0 && len(m.dyn) > 0 {
			d := m.dyn[k%len(m.dyn)]
			n = d.name
		}
		if m.claim([]byte(n)) {
			dst = m.keyBytes(dst, []byte(n), false)
			dst = append(dst, '1')
		}
	}
	r := flatResult{out: string(dst), bad: m.badJSON, comma: m.comma}
	for _, d := range m.dyn {
		r.names = append(r.names, strings.Clone(d.name))
	}
	return r
}

func sameAsOracle(t *testing.T, prefix string, comma bool, docs ...string) flatResult {
	t.Helper()
	want := flattenRow(t, true, prefix, comma, docs...)
	got := flattenRow(t, false, prefix, comma, docs...)
	if !validMembers(want.out) {
		// The oracle wrote something that is not JSON (fastjson's loose
		// numbers, NaN, Go escapes): the flattener must write JSON instead,
		// or refuse the document; rows like these were refused before.
		if !validMembers(got.out) {
			t.Fatalf("prefix %q docs %q: not JSON: %s", prefix, docs, got.out)
		}
		return got
	}
	if got.out != want.out || got.bad != want.bad || got.comma != want.comma || strings.Join(got.names, "\x00") != strings.Join(want.names, "\x00") {
		t.Fatalf("prefix %q docs %q:\n got %+v\nwant %+v", prefix, docs, got, want)
	}
	return got
}

// validMembers reports whether out ("HEAD" and object members) is JSON.
func validMembers(out string) bool {
	return json.Valid([]byte("{" + strings.TrimPrefix(strings.TrimPrefix(out, "HEAD"), ",") + "}"))
}

// FuzzFlattenJSON compares the flattener with the fastjson oracle on
// arbitrary bytes, alone and after a document that claimed names.
func FuzzFlattenJSON(f *testing.F) {
	for _, tc := range flatCases {
		f.Add(tc.in)
	}
	for _, s := range []string{`{"a":1e5,"b":[{"c\"":"\u00e9"}]}`, "{\"\xff\":\"\x01\"}", `{"a":{"b":{}}}`, `{"a" : [ 1 , { } ] }`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for _, prefix := range []string{"", "col"} {
			sameAsOracle(t, prefix, prefix == "", doc)
			sameAsOracle(t, prefix, true, `{"a":1,"b":{"c":2},"qty":3}`, doc)
		}
	})
}

// TestFlattenJSONRandomDocuments compares the flattener with the oracle on
// generated documents, valid and slightly broken, many names deep.
func TestFlattenJSONRandomDocuments(t *testing.T) {
	n := 30_000
	if testing.Short() {
		n = 3_000
	}
	r := rand.New(rand.NewPCG(7, 11))
	for k := 0; k < n; k++ {
		var b strings.Builder
		genObject(r, &b, 0)
		doc := b.String()
		if k%4 == 3 { // break it somewhere
			pos := r.IntN(len(doc) + 1)
			doc = doc[:pos] + string("{}[]\",: \\n0x"[r.IntN(12)]) + doc[pos:]
		}
		prefix := ""
		if k%3 == 0 {
			prefix = "p"
		}
		var prev strings.Builder
		genObject(r, &prev, 1)
		sameAsOracle(t, prefix, k%2 == 0, prev.String(), doc)
	}
}

// TestFlattenJSONDeepNesting: fastjson refuses more than 300 levels, in
// objects and arrays alike.
func TestFlattenJSONDeepNesting(t *testing.T) {
	for _, depth := range []int{1, 2, 150, 299, 300, 301, 302, 1000} {
		obj := strings.Repeat(`{"k":`, depth-1) + "1" + strings.Repeat("}", depth-1)
		arr := `{"k":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + "}"
		if depth == 1 {
			obj, arr = `{"k":1}`, `{"k":1}`
		}
		for _, doc := range []string{obj, arr} {
			for _, prefix := range []string{"", "col"} {
				r := sameAsOracle(t, prefix, true, doc)
				if prefix == "" && r.bad != (depth > 300) {
					t.Errorf("depth %d: bad = %v", depth, r.bad)
				}
			}
		}
	}
}

// TestFlattenJSONManyNames crosses the 32 names where claim switches to a
// hash set, then refuses a document: its claims must be undone.
func TestFlattenJSONManyNames(t *testing.T) {
	var b bytes.Buffer
	b.WriteByte('{')
	for k := 0; k < 50; k++ {
		fmt.Fprintf(&b, `"n%d":%d,`, k, k)
	}
	doc := b.String()
	sameAsOracle(t, "col", true, doc+`"end":1}`, doc+`"n1":{"x":1}}`, doc+`"end":1`, `{"n40":1,"n60":2}`)
	sameAsOracle(t, "", true, `{"a":1}`, doc+`"n1":2}`)
}
