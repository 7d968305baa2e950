package jsonnum

import (
	"strings"
	"testing"
)

func TestTokenOutOfRange(t *testing.T) {
	cases := []struct {
		tok string
		out bool
	}{
		{"0", false},
		{"-0", false},
		{"42", false},
		{"999999999999999999", false},
		{"9223372036854775807", false},
		{"-9223372036854775808", false},
		{"9223372036854775808", true},
		{"-9223372036854775809", true},
		{"18446744073709551616", true},
		{"1" + strings.Repeat("0", 99), true},
		{"12.99", false},
		{"18446744073709551616.5", false},
		{"1e19", false},
		{"1.5E3", false},
		{"1e400", true},
		{"-1e400", true},
		{"1E+309", true},
		{"1.7976931348623157e308", false},
		{"1.7976931348623159e308", true},
		{"1e-400", false},
		{"2" + strings.Repeat("0", 308) + ".5", true},
		{"1" + strings.Repeat("0", 308) + ".5", false},
	}
	for _, tc := range cases {
		if got := TokenOutOfRange([]byte(tc.tok)); got != tc.out {
			t.Errorf("TokenOutOfRange(%.40s) = %v, want %v", tc.tok, got, tc.out)
		}
	}
}
