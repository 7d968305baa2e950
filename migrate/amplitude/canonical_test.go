package amplitude

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

// The records the transform writes are in the shape the /import decoder's
// one-pass path takes (record.Options.Canonical), with no name repeated
// (Options.UniqueNames, which the general path ignores). Over the fixture
// lines (escapes, numeric ids, colliding names, device-only events…),
// generated lines (repeated and reserved names, odd values) and the
// benchmark's lines, that path gives exactly what the general path gives,
// and it takes every benchmark line.
func TestTransformCanonicalMatchesGeneral(t *testing.T) {
	raw, err := os.ReadFile("testdata/events.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		lines = append(lines, genLine(r))
	}
	fixture := len(lines)
	for i := range 2000 {
		lines = append(lines, benchLine(i, hour(1, 0).Add(time.Duration(i)*time.Second)))
	}
	tr := newTransformer()
	var recs [][]byte
	var vouches []record.Vouch
	for _, ln := range lines {
		var ev amplitudeEvent
		rec, _, ferr := tr.appendRecord(nil, nil, ln, &ev)
		if ferr == nil {
			recs = append(recs, rec)
			vouches = append(vouches, tr.vouch.done())
		}
	}
	l := newLoader(newChunkPool(time.Minute), 1, "tok", nil, func() time.Time { return testNow }, 5000)
	opt := l.options()
	if !opt.Canonical || !opt.UniqueNames {
		t.Fatal("the migration does not use the canonical path with its names vouched for")
	}
	var canon, general, vouched record.Decoder
	var b1, b2, b0 store.Batch
	f1 := canon.Decode(opt, recs, &b1)
	opt.Vouched = vouches
	f0 := vouched.Decode(opt, recs, &b0)
	heads, rests := 0, 0
	for i, v := range vouches {
		if err := record.CheckVouch(recs[i], v); err != nil {
			t.Fatalf("record %d: %v (vouch %+v): %s", i, err, v, recs[i])
		}
		heads, rests = heads+b2i(v.Head), rests+b2i(v.Rest)
	}
	if !reflect.DeepEqual(f0, f1) || !reflect.DeepEqual(b0, b1) || vouched.CanonicalHits() != canon.CanonicalHits() {
		t.Fatalf("vouched records decode differently: %d/%d failures, %d/%d one-pass hits", len(f0), len(f1), vouched.CanonicalHits(), canon.CanonicalHits())
	}
	t.Logf("of %d records, %d heads and %d property lists vouched for", len(recs), heads, rests)
	opt.Vouched = nil
	opt.Canonical = false
	f2 := general.Decode(opt, recs, &b2)
	if !reflect.DeepEqual(f1, f2) {
		t.Fatalf("failures differ:\n canonical %+v\n general   %+v", f1, f2)
	}
	for i := range min(len(b1.Events), len(b2.Events)) {
		if !reflect.DeepEqual(b1.Events[i], b2.Events[i]) {
			t.Fatalf("event %d differs:\n canonical %+v\n general   %+v", i, b1.Events[i], b2.Events[i])
		}
	}
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("batches differ: %d/%d events, %d/%d changes", len(b1.Events), len(b2.Events), len(b1.Changes), len(b2.Changes))
	}
	bench := len(recs) - (len(lines) - fixture)
	t.Logf("%d of %d records took the canonical path (%d fixture records)", canon.CanonicalHits(), len(recs), bench)
	for i, v := range vouches[bench:] {
		if !v.Head || !v.Rest {
			t.Fatalf("benchmark record %d not vouched for in full: %+v: %s", i, v, recs[bench+i])
		}
	}
	if canon.CanonicalHits() < len(lines)-fixture {
		t.Errorf("canonical path took %d records, want at least the %d benchmark ones", canon.CanonicalHits(), len(lines)-fixture)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
