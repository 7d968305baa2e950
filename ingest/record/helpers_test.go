package record

import (
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/store"
)

// now is the server clock of every test: 2025-06-01T00:00:00Z.
var now = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

const nowS = 1748736000 // now in seconds

func strictOpts() Options {
	return Options{Project: 7, Token: "tok123", AllowMerge: true, Strict: true, Now: now}
}

func lenientOpts() Options {
	o := strictOpts()
	o.Strict = false
	return o
}

// ev builds a strict-valid event record with extra properties appended.
func ev(extra string) string {
	props := `"time":1748736000,"distinct_id":"u1"`
	if extra != "" {
		props += "," + extra
	}
	return `{"event":"e","properties":{` + props + `}}`
}

// decode runs one record through a fresh Decoder.
func decode(t *testing.T, opt Options, rec string) (store.Batch, []Failure) {
	t.Helper()
	var d Decoder
	var b store.Batch
	fails := d.Decode(opt, [][]byte{[]byte(rec)}, &b)
	if n := len(b.Events) + len(b.Merges) + len(fails); n != 1 {
		t.Fatalf("record produced %d outcomes: %+v %+v", n, b, fails)
	}
	return b, fails
}

// mustEvent decodes a record that must be accepted as an event.
func mustEvent(t *testing.T, opt Options, rec string) store.Event {
	t.Helper()
	b, fails := decode(t, opt, rec)
	if len(fails) > 0 || len(b.Events) != 1 {
		t.Fatalf("want one event, got failures %+v merges %d for %s", fails, len(b.Merges), rec)
	}
	return b.Events[0]
}

// mustFail decodes a record that must fail and returns the failure.
func mustFail(t *testing.T, opt Options, rec string) Failure {
	t.Helper()
	_, fails := decode(t, opt, rec)
	if len(fails) != 1 {
		t.Fatalf("want one failure for %s", rec)
	}
	return fails[0]
}

// props builds n properties "p0":0,"p1":1,...
func props(n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"p` + itoa(i) + `":` + itoa(i))
	}
	return sb.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// nest wraps inner in n levels of {"k": ...}.
func nest(n int, inner string) string {
	return strings.Repeat(`{"k":`, n) + inner + strings.Repeat("}", n)
}
