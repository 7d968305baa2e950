package mapping

import (
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func toMicros(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1_000_000
	case arrow.Millisecond:
		return v * 1_000
	case arrow.Nanosecond:
		return floorDiv(v, 1_000)
	}
	return v
}

// epochMs reads an integer epoch by magnitude: seconds below 1e11 (year
// 5138), milliseconds below 1e14, microseconds below 1e17, else nanoseconds.
func epochMs(v int64) int64 {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a < 1e11:
		return v * 1000
	case a < 1e14:
		return v
	case a < 1e17:
		return floorDiv(v, 1000)
	}
	return floorDiv(v, 1_000_000)
}

var isoLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05.999999999 -0700",
	time.DateOnly,
}

// timeMs converts the time column's value at row i to epoch milliseconds;
// the message is non-empty when the value cannot be used.
func timeMs(v *venc, i int) (int64, string) {
	if v.isNull(i) {
		return 0, "time is NULL"
	}
	switch v.kind {
	case kTimestamp:
		return floorDiv(toMicros(v.ints(i), v.unit), 1000), ""
	case kDate32:
		return v.ints(i) * 86_400_000, ""
	case kDate64:
		return v.ints(i), ""
	case kInt:
		return epochMs(v.ints(i)), ""
	case kUint:
		return epochMs(int64(v.uints(i))), ""
	case kDecimal:
		n := v.arr.(interface{ ValueStr(int) string }).ValueStr(i)
		if x, err := strconv.ParseInt(n, 10, 64); err == nil {
			return epochMs(x), ""
		}
	case kString:
		s := strings.TrimSpace(v.str(i))
		for _, l := range isoLayouts {
			if t, err := time.Parse(l, s); err == nil {
				return t.UnixMilli(), ""
			}
		}
		return 0, "time " + strconv.Quote(s) + " is not an ISO-8601 timestamp"
	}
	return 0, "time column type " + v.dt.String() + " is not a timestamp, date, epoch or ISO string"
}

// appendISO writes microseconds since the epoch as ISO-8601 UTC
// ("2026-03-04T05:06:07Z", with a fraction only when there is one).
func appendISO(dst []byte, us int64) []byte {
	secs := floorDiv(us, 1_000_000)
	frac := us - secs*1_000_000
	days := floorDiv(secs, 86400)
	sod := secs - days*86400
	dst = appendDate(dst, days)
	dst = append(dst, 'T')
	dst = append2(dst, int(sod/3600))
	dst = append(dst, ':')
	dst = append2(dst, int(sod/60%60))
	dst = append(dst, ':')
	dst = append2(dst, int(sod%60))
	if frac != 0 {
		dst = append(dst, '.')
		var b [6]byte
		for k := 5; k >= 0; k-- {
			b[k] = byte('0' + frac%10)
			frac /= 10
		}
		n := 6
		for n > 1 && b[n-1] == '0' {
			n--
		}
		dst = append(dst, b[:n]...)
	}
	return append(dst, 'Z')
}

// appendDate writes days since the epoch as YYYY-MM-DD (proleptic
// Gregorian). Years 0 to 9999 take Neri and Schneider's civil-from-days
// ("Euclidean affine functions and their application to calendar
// algorithms", 2022): 32-bit multiplications instead of 64-bit divisions.
func appendDate(dst []byte, days int64) []byte {
	if days < -719528 || days > 2932896 { // outside 0000-01-01 ... 9999-12-31
		return appendDateWide(dst, days)
	}
	const s = 82 // whole 400-year eras added to keep everything unsigned
	n := uint32(days + 719468 + 146097*s)
	n1 := 4*n + 3
	c := n1 / 146097
	nc := n1 % 146097 / 4
	p2 := uint64(2939745) * uint64(4*nc+3)
	z := uint32(p2 >> 32)
	ny := uint32(p2) / 2939745 / 4
	n3 := 2141*ny + 197913
	mo, d := n3>>16, n3&0xffff/2141+1
	y := 100*c + z - 400*s
	if ny >= 306 { // January and February count in the next year
		y, mo = y+1, mo-12
	}
	return appendYMD(dst, y, mo, d)
}

// appendDateWide is appendDate for any day (Howard Hinnant's
// civil_from_days, then the time package beyond four-digit years).
func appendDateWide(dst []byte, days int64) []byte {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	mo := mp + 3
	if mo > 12 {
		mo -= 12
	}
	if mo <= 2 {
		y++
	}
	if y < 0 || y > 9999 {
		return time.Unix(days*86400, 0).UTC().AppendFormat(dst, time.DateOnly)
	}
	return appendYMD(dst, uint32(y), uint32(mo), uint32(d))
}

func append2(dst []byte, n int) []byte {
	return append(dst, byte('0'+n/10), byte('0'+n%10))
}

// appendYMD writes YYYY-MM-DD for a year of 0 to 9999.
func appendYMD(dst []byte, y, mo, d uint32) []byte {
	b := [10]byte{4: '-', 7: '-'}
	hi, lo := 2*(y/100), 2*(y%100)
	b[0], b[1], b[2], b[3] = digitPairs[hi], digitPairs[hi+1], digitPairs[lo], digitPairs[lo+1]
	b[5], b[6] = digitPairs[2*mo], digitPairs[2*mo+1]
	b[8], b[9] = digitPairs[2*d], digitPairs[2*d+1]
	return append(dst, b[:]...)
}
