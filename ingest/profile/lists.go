package profile

import (
	"bytes"
	"math"
	"strconv"
)

// extend computes $union or $append of v onto the list cur (nil when the
// property is absent). It returns nil when the list stays as it is.
func extend(field string, op Op, cur, v []byte) ([]byte, error) {
	var els [][]byte
	had := cur != nil && !isNull(cur) // null counts as absent
	if had {
		var ok bool
		if els, ok = elements(cur); !ok {
			return nil, fieldErr(ErrType, field, "'%s' cannot take %s: the property is not a list", field, op)
		}
	}
	n := len(els)
	if op == OpAppend {
		els = append(els, v)
	} else {
		add, ok := elements(v)
		if !ok {
			return nil, invalid(field, "must be a list")
		}
		seen := make(map[string]struct{}, len(els)+len(add))
		for _, e := range els {
			seen[elemKey(e)] = struct{}{}
		}
		for _, e := range add {
			if k := elemKey(e); !has(seen, k) {
				seen[k] = struct{}{}
				els = append(els, e)
			}
		}
	}
	if had && len(els) == n {
		return nil, nil
	}
	out := joinList(els)
	if len(out) > MaxValueBytes {
		return nil, fieldErr(ErrTooLarge, field, "'%s' would be %d bytes; a property value is limited to %d bytes", field, len(out), MaxValueBytes)
	}
	return out, nil
}

// without computes $remove: cur without any element equal to v, or nil when
// nothing changes (absent property, not a list, value not present).
func without(cur, v []byte) []byte {
	if cur == nil {
		return nil
	}
	els, ok := elements(cur)
	if !ok {
		return nil
	}
	k := elemKey(v)
	kept := els[:0:0]
	for _, e := range els {
		if elemKey(e) != k {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(els) {
		return nil
	}
	return joinList(kept)
}

func has(m map[string]struct{}, k string) bool { _, ok := m[k]; return ok }

func isNull(b []byte) bool { return string(b) == "null" }

func isNumber(b []byte) bool { return len(b) > 0 && (b[0] == '-' || '0' <= b[0] && b[0] <= '9') }

// elemKey maps equal JSON values to equal keys: numbers by value (so 1 and
// 1.0 match, and neither matches "1"), everything else by its compact bytes,
// which are canonical for strings because appendValue writes them all alike.
func elemKey(e []byte) string {
	if isNumber(e) {
		if f, err := strconv.ParseFloat(b2s(e), 64); err == nil {
			if f == 0 {
				f = 0 // -0 == 0
			}
			return "n" + strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return "r" + string(e)
}

// elements splits a JSON array into the bytes of its elements; ok is false
// when b is not an array. b must be valid JSON.
func elements(b []byte) (els [][]byte, ok bool) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' {
		return nil, false
	}
	inner := b[1 : len(b)-1]
	depth, start, inStr := 0, 0, false
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		if inStr {
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case ',':
			if depth == 0 {
				els = append(els, bytes.TrimSpace(inner[start:i]))
				start = i + 1
			}
		}
	}
	if last := bytes.TrimSpace(inner[start:]); len(last) > 0 || len(els) > 0 {
		els = append(els, last)
	}
	return els, true
}

func joinList(els [][]byte) []byte {
	n := 2
	for _, e := range els {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range els {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// addNumbers computes $add. Integers stay exact while they fit in int64;
// otherwise the sum is a float64 written as JavaScript would.
func addNumbers(field string, cur, delta []byte) ([]byte, error) {
	if cur == nil || isNull(cur) {
		cur = []byte("0")
	}
	if !isNumber(cur) {
		return nil, fieldErr(ErrType, field, "'%s' cannot take $add: the property is not a number", field)
	}
	if !isNumber(delta) {
		return nil, invalid(field, "must be a number")
	}
	a, errA := strconv.ParseInt(b2s(cur), 10, 64)
	b, errB := strconv.ParseInt(b2s(delta), 10, 64)
	if errA == nil && errB == nil && (b >= 0 && a <= math.MaxInt64-b || b < 0 && a >= math.MinInt64-b) {
		return strconv.AppendInt(nil, a+b, 10), nil
	}
	fa, errA := strconv.ParseFloat(b2s(cur), 64)
	fb, errB := strconv.ParseFloat(b2s(delta), 64)
	sum := fa + fb
	if errA != nil || errB != nil || math.IsInf(sum, 0) || math.IsNaN(sum) {
		return nil, fieldErr(ErrInvalid, field, "'%s' is invalid: the sum is out of range", field)
	}
	return appendFloat(nil, sum), nil
}

// appendFloat writes f like JavaScript's Number#toString: plain notation
// from 1e-6 up to 1e21, exponent notation outside.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'e', -1, 64)
}
