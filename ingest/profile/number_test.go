package profile

import (
	"errors"
	"strings"
	"testing"
)

// A number beyond what readers of stored profiles can hold fails its
// update naming the field, as it fails an event (package jsonnum); numbers
// in range keep their text.
func TestNumberRange(t *testing.T) {
	hundred := "1" + strings.Repeat("0", 99)
	cases := []struct {
		name  string
		group bool
		op    string
		value string
		field string // "" when accepted
	}{
		{"int64 max", false, "$set", "9223372036854775807", ""},
		{"int64 min", false, "$set", "-9223372036854775808", ""},
		{"decimal", false, "$set", "12.99", ""},
		{"big decimal, finite", false, "$set", "18446744073709551616.5", ""},
		{"underflow is zero", false, "$set", "1e-400", ""},
		{"1e400", false, "$set", "1e400", "$set.n"},
		{"2^64", false, "$set", "18446744073709551616", "$set.n"},
		{"int64 min - 1", false, "$set", "-9223372036854775809", "$set.n"},
		{"100 digits", false, "$set", hundred, "$set.n"},
		{"$set_once", false, "$set_once", "1E+309", "$set_once.n"},
		{"$add", false, "$add", "18446744073709551616", "$add.n"},
		{"$add in range", false, "$add", "9223372036854775807", ""},
		{"$union list", false, "$union", "[1,1e400]", "$union.n"},
		{"$union scalar", false, "$union", hundred, "$union.n"},
		{"$append nested", false, "$append", `{"a":[1,{"b":-1e999}]}`, "$append.n"},
		{"group $set", true, "$set", "1e400", "$set.n"},
		{"group $union", true, "$union", "[99999999999999999999]", "$union.n"},
		// $remove can still take out a value stored before the rule.
		{"$remove", false, "$remove", "1e400", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			members := `"` + tc.op + `":{"ok":1,"n":` + tc.value + `}`
			var (
				u   Update
				err error
			)
			if tc.group {
				u, err = ParseGroup([]byte(group(members)))
			} else {
				u, err = ParseUser([]byte(user(members)))
			}
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(u.Props) != 2 || !strings.Contains(string(u.Props[1].Value), tc.value) {
					t.Fatalf("props %q, want n as sent", u.Props)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want an invalid FieldError", err)
			}
			if fe.Field != tc.field || !strings.HasPrefix(fe.Message, "'"+tc.field+"' is invalid: number out of range") {
				t.Fatalf("failure %+v, want field %s and the range message", fe, tc.field)
			}
		})
	}
}

// A stored profile holding such a number (written before the rule) still
// loads: only what clients send is judged.
func TestNumberRangeStoredProfile(t *testing.T) {
	var p Profile
	if err := p.UnmarshalJSON([]byte(`{"n":1e400,"m":18446744073709551616}`)); err != nil {
		t.Fatalf("stored profile refused: %v", err)
	}
}
