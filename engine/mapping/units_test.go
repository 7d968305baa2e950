package mapping

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/record"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

func TestAppendISOAndDateMatchTimePackage(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 200_000; k++ {
		us := r.Int64N(2*253402300799999999) - 62135596800000000/2 // years ~1000..9999
		if k < 10 {
			us = []int64{0, -1, 1, 999_999, -86_400_000_000, 951_782_400_000_000, 4_102_444_800_000_000, -62_135_596_800_000_000, 253_402_300_799_999_999, 1_000}[k]
		}
		tm := time.UnixMicro(us).UTC()
		want := tm.Format("2006-01-02T15:04:05.999999Z")
		if got := string(appendISO(nil, us)); got != want {
			t.Fatalf("appendISO(%d) = %s, want %s", us, got, want)
		}
		days := floorDiv(us, 86_400_000_000)
		if got, want := string(appendDate(nil, days)), tm.Format(time.DateOnly); got != want {
			t.Fatalf("appendDate(%d) = %s, want %s", days, got, want)
		}
	}
}

func TestAppendDecimal(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		scale int32
		want  string
	}{
		{1234, 2, "12.34"}, {-5, 2, "-0.05"}, {0, 2, "0.00"}, {7, 0, "7"}, {-7, 3, "-0.007"},
		{12, -2, "1200"}, {9_223_372_036_854_775_807, 4, "922337203685477.5807"},
	} {
		if got := string(appendDecimal(nil, decimal128.FromI64(tc.n), tc.scale)); got != tc.want {
			t.Errorf("appendDecimal(%d, %d) = %s, want %s", tc.n, tc.scale, got, tc.want)
		}
	}
	big := decimal128.FromBigInt(new(bigInt).exp())
	if got := string(appendDecimal(nil, big, 2)); got != big.ToString(2) {
		t.Errorf("beyond int64: %s", got)
	}
}

func TestEpochMs(t *testing.T) {
	const ms = int64(1_793_536_245_123)
	for _, tc := range []struct{ in, want int64 }{
		{ms / 1000, ms / 1000 * 1000}, {ms, ms}, {ms * 1000, ms}, {ms * 1_000_000, ms}, {0, 0}, {-86400, -86_400_000},
	} {
		if got := epochMs(tc.in); got != tc.want {
			t.Errorf("epochMs(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestTimeFromStrings(t *testing.T) {
	want := time.Date(2026, 11, 1, 12, 30, 45, 123_000_000, time.UTC).UnixMilli()
	for _, s := range []string{"2026-11-01T12:30:45.123Z", "2026-11-01 12:30:45.123", "2026-11-01T13:30:45.123+01:00", " 2026-11-01T12:30:45.123 "} {
		v := newVenc(arrow.BinaryTypes.String, false)
		v.bind(stringArray(s))
		if got, msg := timeMs(&v, 0); msg != "" || got != want {
			t.Errorf("%q: got %d %q, want %d", s, got, msg, want)
		}
	}
	v := newVenc(arrow.BinaryTypes.String, false)
	v.bind(stringArray("yesterday"))
	if _, msg := timeMs(&v, 0); msg == "" {
		t.Error("an unparsable time was accepted")
	}
}

func TestNormalizeInsertID(t *testing.T) {
	sha1 := "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
	got := NormalizeInsertID(sha1)
	if len(got) != 36 || !record.ValidInsertID(got) || got != NormalizeInsertID(sha1) {
		t.Fatalf("NormalizeInsertID(sha1) = %q", got)
	}
	// A placeholder the import API refuses is normalised, not kept.
	if got := NormalizeInsertID("undefined"); got == "undefined" || !record.ValidInsertID(got) {
		t.Fatalf("placeholder kept: %q", got)
	}
	if NormalizeInsertID("abc-123") != "abc-123" {
		t.Fatal("a valid id was changed")
	}
	if NormalizeInsertID("{abc}") == NormalizeInsertID("[abc]") {
		t.Fatal("different ids normalised to one")
	}
	for _, id := range []string{sha1, "undefined", "abc-123", "{abc}", "", "[amp] e\x1fu"} {
		if got := AppendNormalizedInsertID([]byte("p:"), id); string(got) != "p:"+NormalizeInsertID(id) {
			t.Errorf("AppendNormalizedInsertID(%q) = %q, NormalizeInsertID %q", id, got, NormalizeInsertID(id))
		}
	}
}

func TestAppendIntMatchesStrconv(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	check := func(x int64) {
		if got, want := string(appendInt([]byte("x"), x)), string(strconv.AppendInt([]byte("x"), x, 10)); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", x, got, want)
		}
		u := uint64(x)
		if got, want := string(appendUint(nil, u)), strconv.FormatUint(u, 10); got != want {
			t.Fatalf("appendUint(%d) = %s, want %s", u, got, want)
		}
	}
	for _, x := range []int64{0, 1, -1, 9, 10, 99, 100, 101, math.MaxInt64, math.MinInt64, math.MinInt64 + 1} {
		check(x)
	}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		for _, d := range []int64{-1, 0, 1} {
			check(p + d)
			check(-p - d)
		}
	}
	for k := 0; k < 200_000; k++ {
		check(r.Int64() >> r.IntN(64))
	}
}

// The fast civil-from-days agrees with the time package on every day of
// years 0 to 9999, and the bounds fall back to the general path.
func TestAppendDateEveryDay(t *testing.T) {
	for days := int64(-719528 - 3); days <= 2932896+3; days++ {
		want := time.Unix(days*86400, 0).UTC().Format(time.DateOnly)
		if got := string(appendDate(nil, days)); got != want {
			t.Fatalf("appendDate(%d) = %s, want %s", days, got, want)
		}
	}
}
