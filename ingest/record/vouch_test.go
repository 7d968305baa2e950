package record

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/valyala/fastjson"
)

// vouchFor is what an honest encoder would vouch for rec: its head when
// the name, distinct_id and $insert_id are clean, the insert id valid and
// the time a plain integer; its properties after $insert_id when they pass
// CleanMembers, names are unique (and none is time, distinct_id or
// $insert_id) and any $user_id, $device_id lead in that order.
func vouchFor(rec []byte) Vouch {
	var v Vouch
	s := canonScan{b: rec}
	if len(rec) < len(canonHead) || string(rec[:len(canonHead)]) != canonHead {
		return v
	}
	h, ok := s.head()
	if !ok {
		return v
	}
	if (!s.hi || utf8.ValidString(h.name+h.did+h.iid)) && ValidInsertID(h.iid) && h.ms >= MinHeadTimeMs &&
		h.time == strconv.FormatInt(h.ms, 10) && len(h.name) <= maxRunes && len(h.did) <= maxRunes {
		v.Head, v.TimeMs, v.TimeLen = true, h.ms, uint8(len(h.time))
		v.NameLen, v.DidLen, v.IidLen = uint16(len(h.name)), uint16(len(h.did)), uint8(len(h.iid))
	}
	if !bytes.HasSuffix(rec, []byte("}}")) || len(rec)-h.rest < 2 {
		return v
	}
	rest := rec[h.rest : len(rec)-2]
	n, ok := CleanMembers(rest)
	if !ok || n >= maxMembers {
		return v
	}
	if len(rest) > 0 {
		pv, err := fastjson.ParseBytes(append(append([]byte{'{'}, rest[1:]...), '}'))
		if err != nil {
			return v
		}
		seen := map[string]bool{"time": true, "distinct_id": true, "$insert_id": true}
		i, good := 0, true
		pv.GetObject().Visit(func(key []byte, _ *fastjson.Value) {
			k := string(key)
			switch {
			case seen[k]:
				good = false
			case k == "$user_id" && i != 0, k == "$device_id" && i > 1,
				k == "$device_id" && i == 1 && !seen["$user_id"]:
				good = false
			}
			seen[k] = true
			i++
		})
		if !good {
			return v
		}
	}
	v.Rest, v.Members = true, int16(n)
	return v
}

// decodeVouched checks that vouching for recs (as vouchFor does, in full,
// for the head only and for the rest only) changes nothing: the same
// failures and batch, and the one-pass path takes the same records, as
// when it reads each record in full; and that CheckVouch accepts each
// honest vouch.
func decodeVouched(t testing.TB, opt Options, recs [][]byte) {
	t.Helper()
	var d1 Decoder
	var b1 store.Batch
	opt.Canonical = true
	f1 := d1.Decode(opt, recs, &b1)
	for part := range 3 {
		var d2 Decoder
		var b2 store.Batch
		opt.Vouched = nil
		for _, r := range recs {
			v := vouchFor(r)
			if err := CheckVouch(r, v); err != nil {
				t.Fatalf("CheckVouch refuses an honest vouch %+v: %v: %q", v, err, r)
			}
			switch part {
			case 1:
				v.Rest = false
			case 2:
				v.Head = false
			}
			opt.Vouched = append(opt.Vouched, v)
		}
		f2 := d2.Decode(opt, recs, &b2)
		if !reflect.DeepEqual(f1, f2) {
			t.Fatalf("vouch part %d: failures differ:\n read    %+v\n vouched %+v", part, f1, f2)
		}
		if !reflect.DeepEqual(b1, b2) {
			t.Fatalf("vouch part %d: batches differ:\n read    %+v\n vouched %+v", part, b1, b2)
		}
		if d1.CanonicalHits() != d2.CanonicalHits() {
			t.Fatalf("vouch part %d: one-pass path took %d records read in full, %d vouched for", part, d1.CanonicalHits(), d2.CanonicalHits())
		}
	}
}

func TestVouchedMatchesCanonical(t *testing.T) {
	all := canonRecords()
	heads, rests := 0, 0
	for _, r := range all {
		v := vouchFor(r)
		heads += b2i(v.Head)
		rests += b2i(v.Rest)
	}
	if heads < len(all)/3 || rests < len(all)/3 {
		t.Fatalf("of %d test records, only %d heads and %d rests can be vouched for", len(all), heads, rests)
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

// The encoders' checks: Verbatim, CleanNumber, CleanValue and
// CleanMembers take what the one-pass path takes.
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
	for _, c := range [][3]int{{3, 5, 1}, {3, 6, 0}, {maxRunes, maxRunes + 2, 1}, {maxRunes + 1, maxRunes + 3, 0}} {
		if Verbatim(c[0], c[1]) != (c[2] == 1) {
			t.Errorf("Verbatim(%d, %d) = %v", c[0], c[1], c[2] != 1)
		}
	}
	for n, want := range map[string]bool{"0": true, "-1.5e+3": true, "12": true, "01": false, "1.": false,
		"+1": false, "1.2.3": false, "1e": false, "": false, "1 ": false, "NaN": false} {
		if CleanNumber([]byte(n)) != want {
			t.Errorf("CleanNumber(%q) = %v", n, !want)
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// CheckVouch catches a vouch that misstates its record.
func TestCheckVouchRefusesLies(t *testing.T) {
	rec := []byte(canon("e", "1748736000000", "u1", iid36, `"a":1,"b":"x"`))
	honest := vouchFor(rec)
	if !honest.Head || !honest.Rest {
		t.Fatalf("honest vouch %+v", honest)
	}
	for name, lie := range map[string]func(v *Vouch){
		"members":  func(v *Vouch) { v.Members++ },
		"time":     func(v *Vouch) { v.TimeMs++ },
		"name len": func(v *Vouch) { v.NameLen++ },
		"did len":  func(v *Vouch) { v.DidLen-- },
	} {
		v := honest
		lie(&v)
		if CheckVouch(rec, v) == nil {
			t.Errorf("%s: a false vouch passed", name)
		}
	}
	frac := []byte(canon("e", "1748736000000.4", "u1", iid36, `"a":1,"b":"x"`))
	if CheckVouch(frac, honest) == nil {
		t.Error("a fractional time passed as the integer vouched for")
	}
	// 1748736000 reads as seconds: vouching it as milliseconds is a lie.
	secs := []byte(canon("e", "1748736000", "u1", iid36, `"a":1,"b":"x"`))
	v := vouchFor(secs)
	if v.Head {
		t.Errorf("a time in seconds was vouched for: %+v", v)
	}
	v.Head, v.TimeMs, v.TimeLen = true, 1748736000, 10
	if CheckVouch(secs, v) == nil {
		t.Error("a time in seconds passed as milliseconds")
	}
	esc := []byte(canon("e", "1748736000000", "u1", iid36, `"a":"x\"y"`))
	if v := vouchFor(esc); v.Rest || CheckVouch(esc, Vouch{Rest: true, Members: 1}) == nil {
		t.Errorf("an escaped string was vouched for: %+v", v)
	}
}

// A wrong vouch (an encoder's bug) may accept a wrong record, but the
// decoder must never read outside the record or panic over it.
func TestLyingVouchesDoNotPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	opt := strictOpts()
	opt.Canonical = true
	for _, c := range canonCases {
		rec := []byte(c.rec)
		for range 300 {
			v := vouchFor(rec)
			v.Head, v.Rest = r.IntN(2) == 0, r.IntN(2) == 0
			n := len(rec) + 4
			v.NameLen, v.DidLen = uint16(r.IntN(n)), uint16(r.IntN(n))
			v.IidLen, v.TimeLen = uint8(r.IntN(min(n, 256))), uint8(r.IntN(min(n, 256)))
			v.Members = int16(r.IntN(300) - 10)
			opt.Vouched = []Vouch{v}
			var d Decoder
			var b store.Batch
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("vouch %+v on %q: panic %v", v, rec, p)
					}
				}()
				d.Decode(opt, [][]byte{rec}, &b)
			}()
		}
	}
}
