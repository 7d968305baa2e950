package mapping

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tributary-dev/tributary/internal/jsonscan"
	"github.com/tributary-dev/tributary/internal/jsonw"
)

// Most strings a row carries are short plain ASCII. These helpers test
// eight bytes at a time whether any needs attention and leave the rare
// rest to the byte-by-byte code.

// load64 reads s[i:i+8] as one little-endian word; the caller guarantees
// i+8 <= len(s), so no bounds are checked.
func load64(s string, i int) uint64 {
	p := (*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))
	return binary.LittleEndian.Uint64(p[:])
}

// plainBytes reports whether no byte of v is '"', '\\', a control byte or
// non-ASCII.
func plainBytes(v uint64) bool { return (jsonscan.Special(v)|v)&jsonscan.MSB == 0 }

// isPlain reports whether jsonw.String would copy s verbatim: ASCII
// without '"', '\\' and control bytes. Short strings are read as one or
// two overlapping words rather than byte by byte.
func isPlain(s string) bool {
	n := len(s)
	switch {
	case n >= 8:
		i := 0
		for ; i+8 < n; i += 8 {
			if !plainBytes(load64(s, i)) {
				return false
			}
		}
		return plainBytes(load64(s, n-8))
	case n >= 4:
		return plainBytes(uint64(load32(s, 0)) | uint64(load32(s, n-4))<<32)
	}
	v := uint64(jsonscan.LSB * ' ')
	for k := 0; k < n; k++ {
		v = v<<8 | uint64(s[k])
	}
	return plainBytes(v)
}

// load32 is load64 for s[i:i+4].
func load32(s string, i int) uint32 {
	p := (*[4]byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))
	return binary.LittleEndian.Uint32(p[:])
}

// appendString is jsonw.String, faster for plain ASCII. Strings of up to
// 16 bytes are checked and moved as one or two (overlapping) words.
func appendString(dst []byte, s string) []byte {
	n, k := len(dst), len(s)
	if k > 16 || cap(dst)-n < 18 {
		if !isPlain(s) {
			return appendNonPlain(dst, s)
		}
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b := dst[n : n+18]
	switch {
	case k >= 8:
		w1, w2 := load64(s, 0), load64(s, k-8)
		if !plainBytes(w1) || !plainBytes(w2) {
			return appendNonPlain(dst, s)
		}
		binary.LittleEndian.PutUint64(b[1:], w1)
		binary.LittleEndian.PutUint64(b[k-7:], w2)
	case k >= 4:
		w1, w2 := load32(s, 0), load32(s, k-4)
		if !plainBytes(uint64(w1) | uint64(w2)<<32) {
			return appendNonPlain(dst, s)
		}
		binary.LittleEndian.PutUint32(b[1:], w1)
		binary.LittleEndian.PutUint32(b[k-3:], w2)
	default:
		for j := 0; j < k; j++ {
			c := s[j]
			if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				return appendNonPlain(dst, s)
			}
			b[1+j] = c
		}
	}
	b[0], b[k+1] = '"', '"'
	return dst[:n+k+2]
}

// keepMask[k] selects the first k of sixteen bytes held in two words.
var keepMask = func() (t [17][2]uint64) {
	for k := range t {
		if k <= 8 {
			t[k][0] = 1<<(8*k) - 1 // all ones for k = 8: the shift overflows to 0
		} else {
			t[k] = [2]uint64{^uint64(0), 1<<(8*(k-8)) - 1}
		}
	}
	return t
}()

// appendStringWide is appendString for a string inside a larger buffer
// from which sixteen bytes may be read at its start (wide): a short one is
// then checked and moved as two words whatever its length, without the
// branches (and mispredictions) of a length-dependent copy.
func appendStringWide(dst []byte, s string, wide bool) []byte {
	n, k := len(dst), len(s)
	if !wide || k > 16 || cap(dst)-n < 18 {
		return appendString(dst, s)
	}
	p := (*[16]byte)(unsafe.Pointer(unsafe.StringData(s)))
	w1, w2 := binary.LittleEndian.Uint64(p[:8]), binary.LittleEndian.Uint64(p[8:])
	m := keepMask[k]
	w1 = w1&m[0] | (jsonscan.LSB*' ')&^m[0] // bytes past the string read as spaces
	w2 = w2&m[1] | (jsonscan.LSB*' ')&^m[1]
	if !plainBytes(w1) || !plainBytes(w2) {
		return appendNonPlain(dst, s)
	}
	b := dst[n : n+18]
	b[0] = '"'
	binary.LittleEndian.PutUint64(b[1:], w1)
	binary.LittleEndian.PutUint64(b[9:], w2)
	b[k+1] = '"'
	return dst[:n+k+2]
}

// appendRaw appends s[from:to]; when sixteen bytes of s can be read from
// from and written to dst, it moves them at once whatever the length.
func appendRaw(dst []byte, s string, from, to int) []byte {
	n := len(dst)
	if to-from > 16 || from+16 > len(s) || cap(dst)-n < 16 {
		return append(dst, s[from:to]...)
	}
	*(*[16]byte)(dst[n : n+16]) = *(*[16]byte)(unsafe.Pointer(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), from)))
	return dst[:n+to-from]
}

// appendWide appends b, moving sixteen bytes at once when b is short and
// that many can be read within its capacity.
func appendWide(dst, b []byte) []byte {
	n := len(dst)
	if len(b) > 16 || cap(b) < 16 || cap(dst)-n < 16 {
		return append(dst, b...)
	}
	*(*[16]byte)(dst[n : n+16]) = *(*[16]byte)(b[:16])
	return dst[:n+len(b)]
}

// appendStringAt writes row i of the plain string column v (offs set).
func appendStringAt(dst []byte, v *venc, i int) []byte {
	st, en := int(v.offs[i]), int(v.offs[i+1])
	return appendStringWide(dst, v.data[st:en], st+16 <= len(v.data))
}

// appendNonPlain is jsonw.String for a string that is not plain ASCII:
// valid UTF-8 without '"', '\\', control bytes, U+2028 or U+2029 comes out
// as it is, which takes a few fast passes instead of a rune-by-rune loop.
func appendNonPlain(dst []byte, s string) []byte {
	if hasSpecialASCII(s) || !utf8.ValidString(s) || strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029") {
		return jsonw.String(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// hasSpecialASCII reports whether s holds '"', '\\' or a control byte.
func hasSpecialASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if jsonscan.Special(load64(s, i)) != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return true
		}
	}
	return false
}
