package store

import (
	"encoding/json"
	"errors"
)

// SpliceProps appends to dst the JSON object props with the members of the
// JSON object common after its own: what a scan returns for an event
// written in a batch with Common. Both must be objects as the validator
// writes them ("{}" at least, nothing between a brace and the member
// next to it; CheckCommon).
func SpliceProps(dst, props, common []byte) []byte {
	if len(common) <= 2 { // "{}": nothing to add
		return append(dst, props...)
	}
	if len(props) <= 2 {
		return append(dst, common...)
	}
	dst = append(dst, props[:len(props)-1]...)
	dst = append(dst, ',')
	return append(dst, common[1:]...)
}

// ErrBadCommon refuses a Batch.Common that SpliceProps cannot splice.
var ErrBadCommon = errors.New("store: a batch's common properties must be a JSON object with nothing between its braces and its members")

// CheckCommon reports whether common (a Batch.Common) is empty or a JSON
// object SpliceProps can splice. Stores check every batch before a write
// changes anything, so a bad one fails its write alone.
func CheckCommon(common []byte) error {
	n := len(common)
	switch {
	case n == 0 || string(common) == "{}":
		return nil
	case n < 2 || common[0] != '{' || common[1] != '"' || common[n-1] != '}' || isSpace(common[n-2]) || !json.Valid(common):
		return ErrBadCommon
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
