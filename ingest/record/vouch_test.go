package record

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/valyala/fastjson"
)

// vouchFor is what an honest encoder would vouch for rec: the member count
// of its properties after $insert_id when they pass CleanMembers, names are
// unique (and none is time, distinct_id or $insert_id) and any $user_id,
// $device_id lead in that order; otherwise -1.
func vouchFor(rec []byte) int16 {
	const idKey = `,"$insert_id":"`
	k := bytes.Index(rec, []byte(idKey))
	if k < 0 || !bytes.HasSuffix(rec, []byte("}}")) || len(rec) < 4 {
		return -1
	}
	q := bytes.IndexByte(rec[k+len(idKey):], '"')
	if q < 0 {
		return -1
	}
	rest := rec[k+len(idKey)+q+1 : len(rec)-2]
	n, ok := CleanMembers(rest)
	if !ok || n >= maxMembers {
		return -1
	}
	if len(rest) == 0 {
		return 0
	}
	v, err := fastjson.ParseBytes(append(append([]byte{'{'}, rest[1:]...), '}'))
	if err != nil {
		return -1
	}
	seen := map[string]bool{"time": true, "distinct_id": true, "$insert_id": true}
	i, good := 0, true
	v.GetObject().Visit(func(key []byte, _ *fastjson.Value) {
		s := string(key)
		switch {
		case seen[s]:
			good = false
		case s == "$user_id" && i != 0, s == "$device_id" && i > 1,
			s == "$device_id" && i == 1 && !seen["$user_id"]:
			good = false
		}
		seen[s] = true
		i++
	})
	if !good {
		return -1
	}
	return int16(n)
}

// decodeVouched checks that vouching for recs (as vouchFor does) changes
// nothing: the same failures and batch, and the one-pass path takes the
// same records, as when it reads each record in full.
func decodeVouched(t testing.TB, opt Options, recs [][]byte) {
	t.Helper()
	var d1, d2 Decoder
	var b1, b2 store.Batch
	opt.Canonical = true
	f1 := d1.Decode(opt, recs, &b1)
	opt.Vouched = nil
	for _, r := range recs {
		opt.Vouched = append(opt.Vouched, vouchFor(r))
	}
	f2 := d2.Decode(opt, recs, &b2)
	if !reflect.DeepEqual(f1, f2) {
		t.Fatalf("failures differ:\n read  %+v\n vouched %+v", f1, f2)
	}
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("batches differ:\n read    %+v\n vouched %+v", b1, b2)
	}
	if d1.CanonicalHits() != d2.CanonicalHits() {
		t.Fatalf("one-pass path took %d records read in full, %d vouched for", d1.CanonicalHits(), d2.CanonicalHits())
	}
}

func TestVouchedMatchesCanonical(t *testing.T) {
	var all [][]byte
	for _, c := range canonCases {
		all = append(all, []byte(c.rec))
	}
	for _, c := range canonIDCases {
		all = append(all, []byte(c.rec))
	}
	vouched := 0
	for _, r := range all {
		if vouchFor(r) >= 0 {
			vouched++
		}
	}
	if vouched < len(all)/3 {
		t.Fatalf("only %d of %d test records can be vouched for", vouched, len(all))
	}
	for _, mode := range allModes {
		opt := strictOpts()
		opt.Mode = mode
		for _, r := range all {
			decodeVouched(t, opt, [][]byte{r})
		}
		decodeVouched(t, opt, all)
	}
}

// The encoders' checks: CleanValue and CleanMembers take what the one-pass
// path takes.
func TestCleanValueAndMembers(t *testing.T) {
	long := `"` + string(bytes.Repeat([]byte("x"), maxRunes+1)) + `"`
	for _, c := range []struct {
		v    string
		want bool
	}{
		{`"a"`, true}, {`12.5e-3`, true}, {`true`, true}, {`null`, true},
		{`["a",{"b":[1]}]`, true}, {`"é"`, true}, {`{}`, true},
		{`"a\"b"`, false}, {"\"a\x01\"", false}, {long, false}, {"\"\xff\"", false},
		{`[[[[1]]]]`, false}, {`"a" `, false}, {`1 `, false}, {`01`, false}, {``, false},
	} {
		if got := CleanValue([]byte(c.v)); got != c.want {
			t.Errorf("CleanValue(%.40q) = %v, want %v", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		m    string
		n    int
		want bool
	}{
		{``, 0, true}, {`,"a":1`, 1, true}, {`"a":1,"b":"x"`, 2, true}, {`,"a":[1,2],"b":{"c":null}`, 2, true},
		{`,"a":1,`, 1, false}, {`,"a\n":1`, 0, false}, {`,"a":1}`, 1, false}, {`,"a" :1`, 0, false},
	} {
		if n, ok := CleanMembers([]byte(c.m)); ok != c.want || ok && n != c.n {
			t.Errorf("CleanMembers(%q) = %d, %v; want %d, %v", c.m, n, ok, c.n, c.want)
		}
	}
}
