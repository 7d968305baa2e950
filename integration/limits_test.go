package integration

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The request limits of decisions.md: 2000 records, 10 MiB uncompressed,
// 1 MiB per event; each tested just past the limit (413, nothing stored)
// and, where cheap, exactly at it (accepted).

const maxBody = 10 << 20

// sizedBody is a JSON array of n valid events padded (inside one property
// each, then with trailing spaces) to exactly size bytes.
func sizedBody(t *testing.T, name string, n, size int) ([]byte, []map[string]any) {
	t.Helper()
	evs := events(name, n)
	overhead := len(mustJSON(t, evs)) + n*len(`,"pad":""`)
	per := (size - overhead) / n
	for _, e := range evs {
		e["properties"].(map[string]any)["pad"] = strings.Repeat("p", per)
	}
	b := mustJSON(t, evs)
	if len(b) > size {
		t.Fatalf("sizedBody: %d bytes, more than %d", len(b), size)
	}
	return append(b, bytes.Repeat([]byte(" "), size-len(b))...), evs
}

func TestImportTooLarge(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	post := func(body []byte, gz bool) reply {
		rq := request{Path: "/import", Auth: asSecret, Body: body}
		if gz {
			rq.Body, rq.Header = gzipped(t, body), map[string]string{"Content-Encoding": "gzip"}
		}
		return s.do(t, rq)
	}
	tooLarge := func(what string, r reply) {
		t.Helper()
		if r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: want 413, got %s", what, r)
		}
		wantError(t, r, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
	}

	tooLarge("2001 records", post(mustJSON(t, events("too-many", 2001)), false))
	tooLarge("2001 records, gzip", post(mustJSON(t, events("too-many", 2001)), true))

	big, _ := sizedBody(t, "too-big", 20, maxBody+1)
	tooLarge("10 MiB + 1 byte", post(big, false))
	tooLarge("10 MiB + 1 byte uncompressed, sent gzip", post(big, true))

	huge := events("huge-event", 3)
	huge[1]["properties"].(map[string]any)["blob"] = strings.Repeat("b", 1<<20)
	tooLarge("one event over 1 MiB", post(mustJSON(t, huge), false))

	if got := s.export(t, asSecret, 0, nil); len(got) != 0 {
		t.Fatalf("refused requests stored %d events", len(got))
	}

	// At the limits the same requests are accepted.
	wantImported(t, post(mustJSON(t, events("max-records", 2000)), true), 2000)
	exact, exactEvs := sizedBody(t, "max-bytes", 20, maxBody)
	wantImported(t, post(exact, false), 20)
	got := byInsertID(t, s.export(t, asSecret, 0, nil))
	if len(got) != 2020 {
		t.Fatalf("export: %d events, want 2020", len(got))
	}
	for _, id := range insertIDs(exactEvs) {
		if _, ok := got[id]; !ok {
			t.Fatalf("event %s of the 10 MiB request missing", id)
		}
	}
}

// gzipBomb is ~1 GiB of a repeated JSON-like pattern as a gzip stream of a
// few MB: one 16 MiB member compressed once and repeated (RFC 1952 allows
// concatenated members, and Go's reader, like most, reads them all).
func gzipBomb(t *testing.T) (body []byte, inflated int64) {
	t.Helper()
	pattern := []byte(`{"event":"bomb","properties":{"distinct_id":"aaaaaaaaaaaa","k":"vvvvvvvvvvvvvvvvvvvv"}},`)
	const member = 16 << 20
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	for n := 0; n < member; n += len(pattern) {
		zw.Write(pattern)
		inflated += int64(len(pattern))
	}
	zw.Close()
	body = append([]byte(nil), one.Bytes()...)
	copies := int64(1<<30) / inflated
	body = bytes.Repeat(body, int(copies))
	return body, inflated * copies
}

func TestImportGzipBomb(t *testing.T) {
	t.Parallel()
	s := startServer(t, defaultConfig())
	body, inflated := gzipBomb(t)
	t.Logf("gzip bomb: %d bytes on the wire, %d bytes (%.2f GiB) inflated", len(body), inflated, float64(inflated)/(1<<30))
	if inflated < 1<<30-(32<<20) || len(body) > 8<<20 {
		t.Fatalf("bomb is %d bytes inflating to %d; want ~1 GiB from a few MB", len(body), inflated)
	}
	start := time.Now()
	status, respBody := rawPost(t, s, "/import", map[string]string{
		"Authorization":    "Basic " + b64([]byte(mainSecret+":")),
		"Content-Type":     "application/json",
		"Content-Encoding": "gzip",
	}, body)
	took := time.Since(start)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("gzip bomb: want 413, got %d %s", status, respBody)
	}
	wantError(t, reply{Status: status, Body: respBody}, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
	if took > 5*time.Second {
		t.Errorf("413 took %s; the server should stop inflating at 10 MiB", took)
	}
	rss, err1 := s.procStatus("VmRSS")
	peak, err2 := s.procStatus("VmHWM")
	if err1 != nil || err2 != nil {
		t.Fatalf("reading /proc/%d/status: %v %v", s.PID, err1, err2)
	}
	t.Logf("413 after %s; server VmRSS %d MiB, peak VmHWM %d MiB", took.Round(time.Millisecond), rss>>10, peak>>10)
	if peak > 300<<10 {
		t.Errorf("server peak RSS %d MiB during a gzip bomb; want well under 300 MiB", peak>>10)
	}
	// The server is still healthy and stored nothing.
	if got := s.export(t, asSecret, 0, nil); len(got) != 0 {
		t.Fatalf("gzip bomb stored %d events", len(got))
	}
	wantImported(t, s.importEvents(t, asSecret, nil, events("after-bomb", 3)), 3)
}

// rawPost sends a request on its own TCP connection and reads the response
// while the body is still being written: a server that answers early and
// closes (as it should for a bomb) would otherwise surface to Go's client as
// a write error instead of the response.
func rawPost(t *testing.T, s *server, path string, hdr map[string]string, body []byte) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	var head strings.Builder
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", path, strings.TrimPrefix(s.URL, "http://"), len(body))
	for k, v := range hdr {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	go func() { // errors are expected once the server has answered and closed
		_, _ = io.WriteString(conn, head.String())
		_, _ = conn.Write(body)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
