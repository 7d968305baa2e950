package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	key, err := ParseKey(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Repeat([]byte{1}, KeySize)
	s, err := Seal(key, "conn 1/7 password", "hunter2")
	if err != nil || strings.Contains(s, "hunter2") || !strings.HasPrefix(s, "v1:") {
		t.Fatalf("%v %q", err, s)
	}
	if s2, _ := Seal(key, "conn 1/7 password", "hunter2"); s2 == s {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	if got, err := Open(key, "conn 1/7 password", s); err != nil || got != "hunter2" {
		t.Fatalf("open: %v %q", err, got)
	}
	tampered := s[:len(s)-2] + "AA"
	for _, tc := range []struct {
		name     string
		key      []byte
		aad, val string
	}{
		{"other key", other, "conn 1/7 password", s},
		{"other record", key, "conn 2/7 password", s},
		{"changed", key, "conn 1/7 password", tampered},
		{"not sealed", key, "conn 1/7 password", "hunter2"},
	} {
		if _, err := Open(tc.key, tc.aad, tc.val); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", tc.name, err)
		}
	}
	for _, bad := range []string{"", "abcd", strings.Repeat("ab", 31)} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if k, err := ParseKey("q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="); err != nil || len(k) != KeySize {
		t.Fatalf("base64 key: %v", err)
	}
}
