package amplitude

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fastjson"

	"github.com/tributary-dev/tributary/ingest/identity"
	"github.com/tributary-dev/tributary/ingest/record"
	"github.com/tributary-dev/tributary/ingest/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name (rewritten under -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// The transform field by field: every line of testdata/events.ndjson (a
// full Amplitude export event, a device-only one, a numeric user id with
// property names that collide with the standard fields, one without user
// or device, bad times, broken lines, a missing event_type, escapes)
// becomes the /import record in testdata/transformed.golden, followed by
// what POST /import's strict decoder makes of it for a Simplified ID
// Merge project.
func TestTransformGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/events.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransformer()
	var out bytes.Buffer
	var dec record.Decoder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		var ev amplitudeEvent
		rec, side, ferr := tr.appendRecord(nil, nil, sc.Bytes(), &ev)
		if ferr != nil {
			fmt.Fprintf(&out, "# line %d: not transformed: field %q: %s\n", n, ferr.field, ferr.msg)
			continue
		}
		out.Write(rec)
		out.WriteByte('\n')
		fmt.Fprintf(&out, "#   user %q, user properties %s\n", ev.user.of(side), ev.props.of(side))
		var b store.Batch
		fails := dec.Decode(record.Options{Project: 1, Strict: true, Now: time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC), Mode: identity.Simplified},
			[][]byte{rec}, &b)
		if len(fails) > 0 {
			fmt.Fprintf(&out, "#   /import refuses it: %s: %s\n", fails[0].Field, fails[0].Message)
			continue
		}
		e := b.Events[0]
		fmt.Fprintf(&out, "#   stored: event %q distinct_id %q time %d insert_id %s props %s\n", e.Name, e.DistinctID, e.TimeMs, e.InsertID, e.Props)
		if !record.ValidInsertID(e.InsertID) || len(e.InsertID) != 36 {
			t.Errorf("line %d: insert id %q is not 36 valid bytes", n, e.InsertID)
		}
	}
	golden(t, "transformed.golden", out.Bytes())
}

// The same event always gets the same $insert_id; another uuid (a second
// event of that user at the same instant) another one.
func TestInsertIDDeterministic(t *testing.T) {
	id := func(line string) string {
		tr := newTransformer()
		rec, _, ferr := tr.appendRecord(nil, nil, []byte(line), &amplitudeEvent{})
		if ferr != nil {
			t.Fatal(ferr.msg)
		}
		return fastjson.GetString(rec, "properties", "$insert_id")
	}
	a := `{"event_type":"E","user_id":"u","event_time":"2024-03-01 10:00:00.123456","amplitude_id":1,"uuid":"x"}`
	if id(a) != id(a) {
		t.Fatal("same event, two ids")
	}
	if b := strings.Replace(a, `"x"`, `"y"`, 1); id(a) == id(b) {
		t.Fatal("two uuids, one id")
	}
	if b := strings.Replace(a, `.123456`, `.123457`, 1); id(a) == id(b) {
		t.Fatal("two event times, one id")
	}
}

func TestEventTime(t *testing.T) {
	for _, c := range []struct {
		in string
		ms int64
		ok bool
	}{
		{"2021-12-09 00:45:29.430000", 1639010729430, true},
		{"2021-12-09 00:45:29.430999", 1639010729430, true}, // below the ms is dropped
		{"2021-12-09 00:45:29", 1639010729000, true},
		{"2021-12-09T00:45:29.4Z", 1639010729400, true},
		{"2021-12-09 00:45:29.1234567890", 0, false},
		{"2021-12-09 24:00:00", 0, false},
		{"2021-02-29 00:00:00", 0, false},
		{"2021-12-09", 0, false},
		{"", 0, false},
	} {
		var p fastjson.Parser
		v, _ := p.Parse(`"` + c.in + `"`)
		ms, ok := eventTimeMs(v)
		if ok != c.ok || ms != c.ms {
			t.Errorf("%q: got %d %v, want %d %v", c.in, ms, ok, c.ms, c.ok)
		}
	}
}
