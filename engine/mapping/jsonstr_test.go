package mapping

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tributary-dev/tributary/internal/jsonw"
)

func checkAppendString(t *testing.T, s string) {
	t.Helper()
	want := jsonw.String([]byte("x"), s)
	if got := appendString([]byte("x"), s); !bytes.Equal(got, want) {
		t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
	}
	roomy := append(make([]byte, 0, 64), 'x') // the in-place path
	if got := appendString(roomy, s); !bytes.Equal(got, want) {
		t.Fatalf("appendString(%q) with room = %s, want %s", s, got, want)
	}
}

// Every byte value at every position of the eight-byte words, and after
// bytes whose borrow could spill into it.
func TestAppendStringMatchesJSONW(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 18; pos++ {
			b := bytes.Repeat([]byte("a"), 18)
			b[pos] = byte(c)
			checkAppendString(t, string(b))
			checkAppendString(t, string(b[:pos+1]))
			if pos > 0 {
				b[pos-1] = 0
				checkAppendString(t, string(b))
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	alphabet := []byte("ab \"\\\x00\x1f\x7f\x80\xc3\xa9\xe2\x80\xa8\xff/")
	for k := 0; k < 100_000; k++ {
		b := make([]byte, r.IntN(40))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
			if r.IntN(3) > 0 {
				b[j] = 'a' + byte(r.IntN(26))
			}
		}
		checkAppendString(t, string(b))
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("Zürich \"q\" \\ \n \u2028 \xff")
	f.Fuzz(func(t *testing.T, s string) { checkAppendString(t, s) })
}

// The wide variants read up to sixteen bytes past a short string's end;
// what lies there (quotes, backslashes, control and non-ASCII bytes) must
// not leak into the output or change the verdict.
func TestWideCopiesIgnoreWhatFollows(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	junk := "\"\\\x00\x1f\xff\xe2\x80\xa8zz\"\"\\\\\x01\x02\x03"
	alphabet := []byte("ab \"\\\x00\x1f\x7f\x80\xc3\xa9\xe2\x80\xa8\xff/")
	for k := 0; k < 50_000; k++ {
		b := make([]byte, r.IntN(20))
		for j := range b {
			b[j] = 'a' + byte(r.IntN(26))
			if r.IntN(8) == 0 {
				b[j] = alphabet[r.IntN(len(alphabet))]
			}
		}
		buf := string(b) + junk
		s := buf[:len(b)]
		want := jsonw.String([]byte("x"), s)
		roomy := append(make([]byte, 0, 64), 'x')
		if got := appendStringWide(roomy, s, true); !bytes.Equal(got, want) {
			t.Fatalf("appendStringWide(%q) = %q, want %q", s, got, want)
		}
		if got := appendRaw(roomy, buf, 0, len(b)); string(got) != "x"+s {
			t.Fatalf("appendRaw(%q) = %q", s, got)
		}
		if got := appendWide(roomy, []byte(buf)[:len(b)]); string(got) != "x"+s {
			t.Fatalf("appendWide(%q) = %q", s, got)
		}
	}
}
