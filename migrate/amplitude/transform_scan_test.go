package amplitude

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/integration/procstat"
)

// checkPaths transforms line on both paths and fails unless appendRecord
// (fast path, tree fallback) gives exactly what the tree path alone gives:
// record, side buffer, spans and error. It reports whether the fast path
// took the line.
func checkPaths(t testing.TB, fast, tree *transformer, line []byte) bool {
	t.Helper()
	// Non-empty prefixes: the spans and appends must respect them.
	dst0, side0 := []byte("[prev]"), []byte("<side>")
	var ev1, ev2 amplitudeEvent
	_, _, took := fast.appendRecordScan(bytes.Clone(dst0), bytes.Clone(side0), line, &amplitudeEvent{})
	d1, s1, e1 := fast.appendRecord(bytes.Clone(dst0), bytes.Clone(side0), line, &ev1)
	d2, s2, e2 := tree.appendRecordTree(bytes.Clone(dst0), bytes.Clone(side0), line, &ev2)
	if !bytes.Equal(d1, d2) || !bytes.Equal(s1, s2) || ev1 != ev2 || (e1 == nil) != (e2 == nil) || e1 != nil && *e1 != *e2 {
		t.Fatalf("paths differ on %q (fast path took it: %v)\n fast: %s | %s | %+v | %v\n tree: %s | %s | %+v | %v",
			line, took, d1, s1, ev1, e1, d2, s2, ev2, e2)
	}
	// What the fast path vouched for, a full read of the record confirms.
	if v := fast.vouch.done(); e1 == nil {
		if err := record.CheckVouch(d1[len(dst0):], v); err != nil {
			t.Fatalf("vouch %+v for %q: %v\n record: %s", v, line, err, d1[len(dst0):])
		}
	}
	return took
}

// The fast path against the tree path on the fixture and benchmark lines:
// the same bytes, and the fast path takes every line that transforms.
func TestScanMatchesTreeFixtures(t *testing.T) {
	raw, err := os.ReadFile("testdata/events.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	fast, tree := newTransformer(), newTransformer()
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Bytes()
		took := checkPaths(t, fast, tree, line)
		if _, _, ferr := tree.appendRecordTree(nil, nil, line, &amplitudeEvent{}); ferr == nil && !took {
			t.Errorf("the fast path left a good line: %s", line)
		}
	}
	for i := range 2000 {
		if !checkPaths(t, fast, tree, benchLine(i, hour(1, 0).Add(time.Duration(i)*time.Second))) {
			t.Fatalf("the fast path left benchmark line %d", i)
		}
	}
}

// The fast path against the tree path on many generated lines: escapes,
// unicode, invalid UTF-8, control bytes, nulls, nested values, whitespace,
// repeated and missing fields, odd types, lax numbers, and lines broken
// at random.
func TestScanMatchesTreeGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	fast, tree := newTransformer(), newTransformer()
	n, took := 30000, 0
	if testing.Short() {
		n = 3000
	}
	for i := range n {
		line := genLine(r)
		if i%5 == 4 {
			line = mutate(r, line)
		}
		if checkPaths(t, fast, tree, line) {
			took++
		}
	}
	t.Logf("the fast path took %d of %d lines", took, n)
	if took < n/3 {
		t.Errorf("the fast path took only %d of %d lines: the generator misses it", took, n)
	}
}

// The fast path recognises a top-level key by its bytes at the same
// position in the line before (keyShape): lines that resemble each other
// but differ in a key, in the whitespace around a colon, in an escape or
// in the order of keys must still read exactly as the tree path reads them.
func TestScanKeyShapeAcrossLines(t *testing.T) {
	const head = `{"event_type":"e","event_time":"2024-03-01 10:00:00","user_id":"u"`
	lines := []string{
		head + `,"city":"Austin","event_properties":{"a":1}}`,
		head + `,"city":"Austin","event_properties":{"a":1}}`,          // every key as before
		head + `,"city2":"Austin","event_properties":{"a":1}}`,         // a longer key where one was
		head + `,"cit":"Austin","event_properties":{"a":1}}`,           // a shorter one
		head + `,"city" :"Austin","event_properties":{"a":1}}`,         // a space before the colon
		head + `,"city": "Austin" , "event_properties" :{"a":1}}`,      // and around it
		head + `,"city":"Austin","event_properties":{"a":1}}`,          // escaped: the tree path's
		head + `,"event_properties":{"a":1},"city":"Austin"}`,          // another order
		head + `,"city":"Austin","event_properties":{"a":1},"x":null}`, // one key more
		head + `,"city":"Austin"}`,                                     // fewer
		`{"event_time":"2024-03-01 10:00:00","event_type":"e","user_id":"u","city":"Austin"}`,
		head + `,"city":"Austin","event_properties":{"a":1}}`,
		head + `,"city":"Austin","event_properties":{"a":1}`, // cut short
		head + `,"city":"Austin","event_properties":{"a":1}}`,
	}
	fast, tree := newTransformer(), newTransformer()
	for range 2 {
		for _, l := range lines {
			checkPaths(t, fast, tree, []byte(l))
		}
	}
	if len(fast.shape.keys) == 0 {
		t.Fatal("the fast path learned no key positions")
	}
}

// Arbitrary bytes: both paths agree. The seeds are the generator's lines.
func FuzzScanMatchesTree(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		f.Add(genLine(r))
	}
	f.Add([]byte(`{"event_time":"2024-03-01 10:00:00","event_properties":{"a":NaN}}`))
	f.Add([]byte(`{"event_time":"2024-03-01 10:00:00","city":-inf}`))
	fast, tree := newTransformer(), newTransformer()
	f.Fuzz(func(t *testing.T, line []byte) { checkPaths(t, fast, tree, line) })
}

var (
	genNames = []string{
		"event_type", "user_id", "device_id", "event_time", "amplitude_id", "uuid", "event_properties", "user_properties",
		"city", "country", "ip_address", "version_name", "app_version", "os_name", "carrier", "device_carrier",
		"platform", "plan", "price", "revenue", "session_id", "idfa", "language",
		"time", "distinct_id", "$insert_id", "$user_id", "$device_id", "$source", "$import", "$city", "$os",
		"data", "groups", "library", "x", "", "é", "a b",
		// escaped: a top-level one sends a line to the tree path
		"k\\\"ey", "caf\\u00e9", "\\u0000", "tab\\t", "\\ud83d\\ude00",
	}
	plainNames = len(genNames) - 5
	genStrings = []string{
		"", "plain", "Austin, TX", "user-1", "2024-03-01 10:00:00", "2024-03-01T10:00:00.5Z", "2024-02-30 10:00:00",
		`q\"uote`, `back\\slash`, `nl\n`, `\u00e9t\u00e9`, `\ud83d\ude00`, `\ud800`, `\ud800\u0041`, `\uZZZZ`, `\u12`,
		`\/`, `\b\f\r\t`, `\x`, "é世界🎉", "\u2028", "\x01ctrl", "bad\xffutf8", "tab\tin", "undefined", `\\`,
	}
	genNumbers = []string{"0", "1", "-1", "42", "9.5", "-97.74", "1e3", "1E-3", "1709287200000", "123456789012345678901234567890", "1.2.3", "-0", "1e+", "0001"}
	genTimes   = []string{"2024-03-01 10:00:00", "2024-03-01 10:00:00.123456", "2024-03-01T10:06:00.5Z", "2024-12-31 23:59:59.999999", "2024-02-29 00:00:00.1"}
)

// genLine makes an export-like line: mostly well formed, with a valid
// event_time most of the time so the fast path gets its share.
func genLine(r *rand.Rand) []byte {
	var b []byte
	ws := r.IntN(4) == 0
	sp := func() {
		if ws && r.IntN(3) == 0 {
			b = append(b, " \t\n\r"[r.IntN(4)])
		}
	}
	var value func(depth int)
	object := func(depth int, names []string, n int) {
		b = append(b, '{')
		for i := range n {
			if i > 0 {
				sp()
				b = append(b, ',')
			}
			sp()
			b = append(b, '"')
			b = append(b, names[r.IntN(len(names))]...)
			b = append(b, '"')
			sp()
			b = append(b, ':')
			sp()
			value(depth + 1)
			sp()
		}
		b = append(b, '}')
	}
	value = func(depth int) {
		switch k := r.IntN(10); {
		case k < 4:
			b = append(b, '"')
			b = append(b, genStrings[r.IntN(len(genStrings))]...)
			b = append(b, '"')
		case k < 6:
			b = append(b, genNumbers[r.IntN(len(genNumbers))]...)
		case k == 6:
			b = append(b, []string{"true", "false", "null"}[r.IntN(3)]...)
		case k == 7 && depth < 4:
			object(depth, genNames, r.IntN(4))
		case k == 8 && depth < 4:
			b = append(b, '[')
			for i := range r.IntN(4) {
				if i > 0 {
					b = append(b, ',')
				}
				sp()
				value(depth + 1)
			}
			sp()
			b = append(b, ']')
		default:
			b = append(b, "null"...)
		}
	}
	sp()
	b = append(b, '{')
	n := r.IntN(20)
	timeAt := -1
	if r.IntN(8) > 0 {
		timeAt = r.IntN(n + 1)
	}
	for i := 0; i <= n; i++ {
		if i > 0 {
			sp()
			b = append(b, ',')
		}
		sp()
		if i == timeAt {
			b = fmt.Appendf(b, `"event_time":"%s"`, genTimes[r.IntN(len(genTimes))])
			continue
		}
		names := genNames[:plainNames]
		if r.IntN(20) == 0 {
			names = genNames
		}
		name := names[r.IntN(len(names))]
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"')
		sp()
		b = append(b, ':')
		sp()
		if (name == "event_properties" || name == "user_properties") && r.IntN(4) > 0 {
			object(1, genNames, r.IntN(8))
		} else {
			value(1)
		}
	}
	sp()
	b = append(b, '}')
	sp()
	return b
}

// mutate breaks a line at a random place: a byte dropped, doubled or
// replaced.
func mutate(r *rand.Rand, line []byte) []byte {
	if len(line) == 0 {
		return line
	}
	i := r.IntN(len(line))
	switch r.IntN(3) {
	case 0:
		return append(line[:i:i], line[i+1:]...)
	case 1:
		return append(line[:i+1:i+1], line[i:]...)
	}
	out := bytes.Clone(line)
	const pick = "{}[]\",: \nx0-\\"
	out[i] = pick[r.IntN(len(pick))]
	return out
}

// The transform alone, per benchmark line: the fast path and the tree
// path it replaces.
func BenchmarkTransform(b *testing.B) {
	lines := make([][]byte, 1000)
	for i := range lines {
		lines[i] = benchLine(i, hour(1, 0).Add(time.Duration(i)*time.Second))
	}
	for _, path := range []string{"scan", "tree"} {
		b.Run(path, func(b *testing.B) {
			tr := newTransformer()
			f := tr.appendRecord
			if path == "tree" {
				f = tr.appendRecordTree
			}
			var dst, side []byte
			b.SetBytes(int64(len(lines[0])))
			b.ReportAllocs()
			cpu0 := procstat.SelfCPU()
			for i := 0; b.Loop(); i++ {
				var ev amplitudeEvent
				dst, side, _ = f(dst[:0], side[:0], lines[i%len(lines)], &ev)
			}
			// Steadier than ns/op when other processes share the cores.
			b.ReportMetric(float64(procstat.SelfCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// parseEventTimeRef is parseEventTime as it was, through time.Date.
func parseEventTimeRef(s []byte) (int64, bool) {
	if n := len(s); n > 0 && s[n-1] == 'Z' {
		s = s[:n-1]
	}
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	var f [6]int
	for i, at := range [6]int{0, 5, 8, 11, 14, 17} {
		w := 2
		if i == 0 {
			w = 4
		}
		n, ok := digits(s[at : at+w])
		if !ok {
			return 0, false
		}
		f[i] = n
	}
	ms := 0
	if rest := s[19:]; len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 10 {
			return 0, false
		}
		frac, ok := digits(rest[1:])
		if !ok {
			return 0, false
		}
		for range 10 - len(rest) {
			frac *= 10
		}
		ms = frac / 1e6
	}
	if f[1] < 1 || f[1] > 12 || f[2] < 1 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return 0, false
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], 0, time.UTC)
	if t.Day() != f[2] {
		return 0, false
	}
	return t.UnixMilli() + int64(ms), true
}

// The event time (and so every derived $insert_id and record) is what
// time.Date made of it: every day 00..32 of every month 00..13 of every
// year 0000..9999, and random times and fractions.
func TestParseEventTimeMatchesTimeDate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	var b []byte
	check := func() {
		got, gok := parseEventTime(b)
		want, wok := parseEventTimeRef(b)
		if got != want || gok != wok {
			t.Fatalf("%q: %d %v; time.Date gives %d %v", b, got, gok, want, wok)
		}
	}
	fracs := []string{"", ".5", ".123456", ".999999999", ".0000000001", "."}
	for y := 0; y <= 9999; y++ {
		if testing.Short() && y%7 != 0 {
			continue
		}
		for m := 0; m <= 13; m++ {
			for d := 0; d <= 32; d++ {
				b = fmt.Appendf(b[:0], "%04d-%02d-%02d %02d:%02d:%02d%s", y, m, d, r.IntN(25), r.IntN(61), r.IntN(61), fracs[r.IntN(len(fracs))])
				check()
			}
		}
	}
}
