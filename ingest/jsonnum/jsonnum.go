// Package jsonnum holds the one rule for the range of JSON numbers
// Tributary stores, shared by events (ingest/record) and profile updates
// (ingest/profile), which cannot import each other.
//
// JSON numbers have no limit, but every reader of stored data does: the
// query engine, the exports' consumers and Mixpanel's own tools read a
// number as an int64 or a float64, so 1e400 would become infinity and a
// 100-digit id a rounded float, differently in each. An integer literal
// (no fraction, no exponent) must fit an int64; any other number must be
// a finite float64 (a magnitude that rounds to zero, like 1e-400, is
// accepted: it is zero). An id sent as a string keeps every digit.
package jsonnum

import (
	"strconv"
	"unsafe"
)

// Message says why a number was refused, for the field's error.
const Message = "number out of range: an integer must fit in 64 bits (at most 9223372036854775807 in magnitude) and other numbers in a float64 (at most about 1.8e308)"

// int64Max is math.MaxInt64's digits; an integer of 19 digits fits when
// it is not greater (the negative bound is one more).
const int64Max = "9223372036854775807"

// OutOfRange reports whether tok, one valid JSON number whose scanner
// found intDigits digits before any fraction or exponent, is out of
// range. It inlines to two comparisons for the common number, a short
// integer or decimal without exponent.
func OutOfRange(tok []byte, intDigits int, frac, exp bool) bool {
	if !exp && intDigits < len(int64Max) {
		return false
	}
	return outOfRange(tok, intDigits, frac, exp)
}

func outOfRange(tok []byte, intDigits int, frac, exp bool) bool {
	switch {
	case exp:
		return !finiteFloat(tok)
	case frac:
		return intDigits > 308 && !finiteFloat(tok) // 309 digits reach MaxFloat64
	}
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	switch {
	case len(tok) < len(int64Max):
		return false
	case len(tok) > len(int64Max):
		return true
	case neg:
		return string(tok) > "9223372036854775808"
	}
	return string(tok) > int64Max
}

// TokenOutOfRange reports whether tok, one valid JSON number (as a
// parser that validated it hands it over), is out of range.
func TokenOutOfRange(tok []byte) bool {
	i := 0
	if i < len(tok) && tok[i] == '-' {
		i++
	}
	start := i
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		i++
	}
	intDigits := i - start
	frac := i < len(tok) && tok[i] == '.'
	exp := false
	for ; i < len(tok); i++ {
		if tok[i] == 'e' || tok[i] == 'E' {
			exp = true
			break
		}
	}
	return OutOfRange(tok, intDigits, frac, exp)
}

// finiteFloat reports whether a valid JSON number is a finite float64.
func finiteFloat(tok []byte) bool {
	_, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(tok), len(tok)), 64)
	return err == nil
}
