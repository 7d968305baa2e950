package mapping

import (
	"math/rand/v2"
	"strings"
)

// Pieces of generated documents: awkward keys and strings (escapes,
// surrogates, invalid UTF-8), loose numbers.
var genKeys = []string{"a", "b", "a.b", "qty", "price", "time", "", "é", `q\"k`, `\u0041`, `\ud83d\ude00`, "x\ty", `\/`, "\xff", `\z`}

var genStrings = []string{"", "plain", `esc\"q`, `\\`, `\n\t\r\b\f`, `\u00e9`, `\u2028`, `\ud83d\ude00`, `\ud83d`, `\ud83dx`,
	`\ude00\u0041`, `\ud83d\u0041`, `\u12`, `\uZZZZ`, `\x`, "raw\x01ctl", "bad\xffutf8", "日本", "\u2028", `\u0000`, `\u007f`}

var genNumbers = []string{"0", "-0", "1", "-12", "3.25", "1e5", "1E+5", "-2.5e-3", "12345678901234567890123", "1.2.3", "--1",
	"+1", "e5", ".5", "NaN", "nan", "-Inf", "inf", "+inf", "1e"}

func genValue(r *rand.Rand, b *strings.Builder, depth int) {
	switch k := r.IntN(10); {
	case k < 2 && depth < 6:
		genObject(r, b, depth+1)
	case k < 3 && depth < 6:
		b.WriteByte('[')
		for j, n := 0, r.IntN(4); j < n; j++ {
			if j > 0 {
				b.WriteString(sp(r) + ",")
			}
			b.WriteString(sp(r))
			genValue(r, b, depth+1)
		}
		b.WriteString(sp(r) + "]")
	case k < 5:
		b.WriteString(`"` + genStrings[r.IntN(len(genStrings))] + `"`)
	case k < 7:
		b.WriteString(genNumbers[r.IntN(len(genNumbers))])
	default:
		b.WriteString([]string{"true", "false", "null", "{}", "[]", "{ }"}[r.IntN(6)])
	}
}

// genObject writes a random JSON-ish object with nesting and blanks.
func genObject(r *rand.Rand, b *strings.Builder, depth int) {
	b.WriteString(sp(r) + "{")
	for j, n := 0, r.IntN(6); j < n; j++ {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(sp(r) + `"` + genKeys[r.IntN(len(genKeys))] + `"` + sp(r) + ":" + sp(r))
		genValue(r, b, depth)
	}
	b.WriteString(sp(r) + "}" + sp(r))
}

func sp(r *rand.Rand) string {
	if r.IntN(5) > 0 {
		return ""
	}
	return []string{" ", "\n", "\t", "\r", "  "}[r.IntN(5)]
}
