package amplitude

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/migrate/amplitude/amptest"
)

const (
	testKey    = "amp-key-0123456789"
	testSecret = "amp-secret-do-not-leak-9876"
)

func hour(day, h int) time.Time { return time.Date(2024, 3, day, h, 0, 0, 0, time.UTC) }

// quickBackoff keeps retry tests fast.
var quickBackoff = Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Attempts: 3}

// zipOf builds an archive like Amplitude's from name → content (gzipped
// unless the name ends in .json).
func zipOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if _, err := zw.Create("187520/"); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			gz := gzip.NewWriter(w)
			gz.Write([]byte(content))
			gz.Close()
		} else {
			w.Write([]byte(content))
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// linesOf reads an archive, reading files up to wholeMax bytes whole and
// streaming larger ones.
func linesOf(t testing.TB, data []byte, wholeMax int) ([]string, error) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	e := entryReader{wholeMax: wholeMax}
	err = e.readZip(zr, func(loc Location, line []byte) error {
		if line == nil {
			got = append(got, fmt.Sprintf("%s:%d:<too long>", loc.File, loc.Line))
			return nil
		}
		got = append(got, fmt.Sprintf("%s:%d:%s", loc.File, loc.Line, line))
		return nil
	})
	return got, err
}

// Files are read in name order, gzipped or not; blank lines and CRLF are
// handled, line numbers count every line, and a line over MaxLineBytes is
// reported without being held. The same whether a file is read whole or
// streamed, and from one reader's buffers file after file.
func TestArchiveLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+10)
	data := zipOf(t, map[string]string{
		"187520/187520_2024-03-01_1#0.json.gz": "{\"a\":1}\r\n\n{\"a\":2}",
		"187520/187520_2024-03-01_0#0.json.gz": "{\"b\":1}\n" + long + "\n{\"b\":3}\n",
		"187520/plain.json":                    "{\"c\":1}\n",
		"187520/tiny.json":                     "",
	})
	want := []string{
		`187520/187520_2024-03-01_0#0.json.gz:1:{"b":1}`,
		`187520/187520_2024-03-01_0#0.json.gz:2:<too long>`,
		`187520/187520_2024-03-01_0#0.json.gz:3:{"b":3}`,
		`187520/187520_2024-03-01_1#0.json.gz:1:{"a":1}`,
		`187520/187520_2024-03-01_1#0.json.gz:3:{"a":2}`,
		`187520/plain.json:1:{"c":1}`,
	}
	for _, wholeMax := range []int{wholeEntryBytes, 0, 40} { // 40: the small files whole, the long one streamed
		got, err := linesOf(t, data, wholeMax)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("wholeMax %d: got\n%s\nwant\n%s", wholeMax, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	// A corrupt gzip member is an error naming the file.
	bad := zipOf(t, map[string]string{"187520/x.json": "\x1f\x8b garbage"})
	for _, wholeMax := range []int{wholeEntryBytes, 0} {
		if _, err := linesOf(t, bad, wholeMax); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "x.json") {
			t.Fatalf("corrupt gzip, wholeMax %d: %v", wholeMax, err)
		}
	}
}

// A file whose bytes do not match the zip's CRC-32 is corrupt, read whole
// or streamed.
func TestArchiveEntryChecked(t *testing.T) {
	stored := func(content string, size uint64) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "187520/y.json", Method: zip.Store,
			CRC32: crc32.ChecksumIEEE([]byte(`{"d":1}` + "\n")), CompressedSize64: size, UncompressedSize64: size})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	good := `{"d":1}` + "\n"
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"good", stored(good, uint64(len(good)))},
		{"flipped byte", stored(`{"e":1}`+"\n", uint64(len(good)))},
	} {
		for _, wholeMax := range []int{wholeEntryBytes, 0} {
			got, err := linesOf(t, tc.data, wholeMax)
			if tc.name == "good" {
				if err != nil || len(got) != 1 || got[0] != `187520/y.json:1:{"d":1}` {
					t.Fatalf("wholeMax %d: %q %v", wholeMax, got, err)
				}
				continue
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "y.json") {
				t.Fatalf("%s, wholeMax %d: %v", tc.name, wholeMax, err)
			}
		}
	}
}

// Against the fake Export API: a range Amplitude refuses as too large is
// split in halves, 404 ranges are empty, 504 and 429 are retried, and the
// credentials never reach the log.
func TestClientWalk(t *testing.T) {
	srv := amptest.New(testKey, testSecret)
	defer srv.Close()
	srv.MaxHours = 2
	for _, h := range []time.Time{hour(1, 0), hour(1, 1), hour(1, 2), hour(1, 5)} {
		for i := range 3 {
			srv.AddLine(h, fmt.Appendf(nil, `{"event_type":"E","n":%d}`, i))
		}
	}
	srv.FailNext(hour(1, 3), 504, 429)
	var logs bytes.Buffer
	c := &Client{BaseURL: srv.URL, Credentials: Credentials{testKey, testSecret}, Backoff: quickBackoff, TempDir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	var ranges []string
	lines := 0
	err := c.Walk(context.Background(), hour(1, 0), hour(1, 5), func(a, b time.Time, ar *Archive) error {
		ranges = append(ranges, a.Format(hourLayout)+"-"+b.Format(hourLayout))
		return ar.Lines(func(Location, []byte) error { lines++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	// 00-05 has 4 hours with data: 400 → 00-02 (3 hours: 400) → 00-00, 01-02; 03-05 → 504, 429, 200.
	want := "20240301T00-20240301T00 20240301T01-20240301T02 20240301T03-20240301T05"
	if strings.Join(ranges, " ") != want || lines != 12 {
		t.Fatalf("ranges %v, %d lines; want %s and 12", ranges, lines, want)
	}
	var statuses []string
	for _, r := range srv.Requests() {
		statuses = append(statuses, fmt.Sprintf("%s-%s:%d", r.Start[6:], r.End[6:], r.Status))
	}
	wantReq := "01T00-01T05:400 01T00-01T02:400 01T00-01T00:200 01T01-01T02:200 01T03-01T05:504 01T03-01T05:429 01T03-01T05:200"
	if got := strings.Join(statuses, " "); got != wantReq {
		t.Fatalf("requests\n got %s\nwant %s", got, wantReq)
	}
	if strings.Contains(logs.String(), testSecret) || strings.Contains(logs.String(), testKey) {
		t.Fatalf("credentials in the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Fatalf("no retry logged:\n%s", logs.String())
	}
	if ents, _ := os.ReadDir(c.TempDir); len(ents) != 0 {
		t.Fatalf("downloads left behind: %v", ents)
	}
}

// A single hour that stays unavailable fails the walk after its retries;
// wrong credentials fail at once.
func TestClientFailures(t *testing.T) {
	srv := amptest.New(testKey, testSecret)
	defer srv.Close()
	srv.AddLine(hour(1, 0), []byte(`{}`))
	srv.FailNext(hour(1, 0), 503, 503, 503)
	c := &Client{BaseURL: srv.URL, Credentials: Credentials{testKey, testSecret}, Backoff: quickBackoff, Log: slog.New(slog.DiscardHandler)}
	err := c.Walk(context.Background(), hour(1, 0), hour(1, 0), func(time.Time, time.Time, *Archive) error { return nil })
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), testSecret) {
		t.Fatalf("got %v", err)
	}
	c.Credentials.APISecret = "wrong"
	_, err = c.Export(context.Background(), hour(1, 0), hour(1, 0))
	if !errors.Is(err, ErrUnauthorized) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("got %v", err)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("%d requests; want 3 tries and one unauthorized", n)
	}
}

// Credentials print redacted through every route Go offers.
func TestCredentialsRedacted(t *testing.T) {
	c := Credentials{testKey, testSecret}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "c", c, "r", Request{Credentials: c})
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%+v", Request{Credentials: c}), logs.String()} {
		if strings.Contains(s, testSecret) || strings.Contains(s, testKey) {
			t.Fatalf("leaked: %s", s)
		}
	}
	key := bytes.Repeat([]byte{7}, KeySize)
	sealed, err := seal(key, "job1", c)
	if err != nil || strings.Contains(sealed, testSecret) {
		t.Fatal(err)
	}
	if got, err := unseal(key, "job1", sealed); err != nil || !got.equal(c) {
		t.Fatalf("unseal: %v", err)
	}
	if _, err := unseal(key, "job2", sealed); err == nil {
		t.Fatal("sealed credentials opened for another job")
	}
}
