package jsonscan

import (
	"encoding/binary"
	"strconv"
	"testing"
)

func TestSkipSpace(t *testing.T) {
	for _, c := range []struct {
		in   string
		i, n int
	}{{"", 0, 0}, {"  \t\r\nx", 0, 5}, {"x  ", 0, 0}, {"x  ", 1, 3}, {"\v x", 0, 0}, {"\x00", 0, 0}} {
		if got := SkipSpace(c.in, c.i); got != c.n {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", c.in, c.i, got, c.n)
		}
		if got := SkipSpace([]byte(c.in), c.i); got != c.n {
			t.Errorf("SkipSpace([]byte %q, %d) = %d, want %d", c.in, c.i, got, c.n)
		}
	}
}

// Hex4 agrees with strconv on every four-byte string over the bytes that
// matter (digits, both cases of a-f, the bytes around them).
func TestHex4(t *testing.T) {
	alphabet := "09afAFgG/:@`x"
	var s [4]byte
	for _, a := range []byte(alphabet) {
		for _, b := range []byte(alphabet) {
			for _, c := range []byte(alphabet) {
				for _, d := range []byte(alphabet) {
					s = [4]byte{a, b, c, d}
					want, err := strconv.ParseUint(string(s[:]), 16, 16)
					got, ok := Hex4("\\u"+string(s[:]), 2)
					if ok != (err == nil) || ok && got != rune(want) {
						t.Fatalf("Hex4(%q) = %x, %v; strconv says %x, %v", s, got, ok, want, err)
					}
				}
			}
		}
	}
	if _, ok := Hex4([]byte("abc"), 0); ok {
		t.Error("three bytes read as four")
	}
	if _, ok := Hex4("abcd", 1); ok {
		t.Error("read past the end")
	}
}

// The lowest flag Special sets is the first quote, backslash or control
// byte, at every position.
func TestSpecial(t *testing.T) {
	for pos := 0; pos < 8; pos++ {
		for _, c := range []byte{'"', '\\', 0, 0x1f, '\n'} {
			w := []byte("abcdefgh")
			w[pos] = c
			m := Special(binary.LittleEndian.Uint64(w))
			if m == 0 || trailingByte(m) != pos {
				t.Errorf("byte %#x at %d: flags %#x", c, pos, m)
			}
		}
	}
	for _, s := range []string{"abcdefgh", "        ", "\x7f\x80\xff !#[]", "\u00e9\u00e9\u00e9\u00e9"} {
		if m := Special(binary.LittleEndian.Uint64([]byte(s))); m != 0 {
			t.Errorf("%q flagged %#x", s, m)
		}
	}
}

func trailingByte(m uint64) int {
	n := 0
	for m&0xff == 0 {
		m >>= 8
		n++
	}
	return n
}
