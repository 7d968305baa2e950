package amplitude

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"
)

// Any bytes as an export archive: the reader returns lines or an error,
// never panics, and every line it hands out is non-blank and no longer
// than MaxLineBytes.
func FuzzArchive(f *testing.F) {
	f.Add(zipOf(f, map[string]string{"1/1_2024-03-01_0#0.json.gz": "{\"a\":1}\n\n{\"b\":2}"}))
	f.Add(zipOf(f, map[string]string{"1/plain.json": "x\r\ny"}))
	f.Add([]byte("PK\x03\x04 not really a zip"))
	f.Fuzz(func(t *testing.T, data []byte) {
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		_ = readZip(zr, func(loc Location, line []byte) error {
			if line != nil && (len(bytes.TrimSpace(line)) == 0 || len(line) > MaxLineBytes) {
				t.Fatalf("%s:%d: bad line %q", loc.File, loc.Line, line)
			}
			return nil
		})
	})
}

// Any NDJSON content inside a well-formed archive: the reader yields
// exactly the non-blank lines, trimmed, with their line numbers; and the
// transform either refuses a line or makes a record of it.
func FuzzNDJSON(f *testing.F) {
	f.Add("{\"event_type\":\"E\",\"user_id\":\"u\",\"event_time\":\"2024-03-01 10:00:00\"}\n")
	f.Add("\n\r\n  {\"a\":[1,2,{\"b\":null}]}  \n{\"event_time\":\"2024-02-30 00:00:00\"}")
	f.Add("{\"event_properties\":{\"\\u0000\":\"\\ud800\"},\"event_time\":\"2024-03-01T10:00:00Z\"}")
	f.Fuzz(func(t *testing.T, content string) {
		data := zipOf(t, map[string]string{"1/1_2024-03-01_0#0.json.gz": content})
		var want []string
		for _, l := range strings.Split(content, "\n") {
			if s := strings.TrimSpace(l); s != "" {
				want = append(want, s)
			}
		}
		var got []string
		tr := newTransformer()
		zr, _ := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		err := readZip(zr, func(loc Location, line []byte) error {
			got = append(got, string(line))
			var ev amplitudeEvent
			if rec, _, ferr := tr.appendRecord(nil, nil, line, &ev); ferr == nil && !bytes.HasPrefix(rec, []byte("{")) {
				t.Fatalf("record %q", rec)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("lines %q; want %q", got, want)
		}
	})
}
