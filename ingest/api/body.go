package api

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/klauspost/compress/gzip"
)

var (
	errTooLarge = errors.New("too large")
	errBadBody  = errors.New("bad body")
)

// readBody reads the request body, inflating gzip, into buf and stops as
// soon as the uncompressed size passes max: a gzip bomb costs at most max
// bytes of inflation, never the whole thing.
func readBody(r *http.Request, buf *bytes.Buffer, max int64) error {
	// A compressed body is never larger than its content by more than a
	// few bytes per block, so the same cap (plus slack) bounds the wire too.
	var src io.Reader = io.LimitReader(r.Body, max+max/64+1024)
	switch strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))) {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return fmt.Errorf("%w: Content-Encoding is gzip but the body is not: %v", errBadBody, err)
		}
		defer zr.Close()
		src = zr
	default:
		return fmt.Errorf("%w: unsupported Content-Encoding %q (use gzip)", errBadBody, r.Header.Get("Content-Encoding"))
	}
	n, err := buf.ReadFrom(io.LimitReader(src, max+1))
	if err != nil {
		return fmt.Errorf("%w: reading the body: %v", errBadBody, err)
	}
	if n > max {
		return fmt.Errorf("%w: request exceeds max limit of %d bytes", errTooLarge, max)
	}
	return nil
}

// legacyData extracts the data= parameter of a form-encoded request (from
// the body's form, else the query) and decodes it: base64 or raw JSON, both
// of which real SDKs send.
func legacyData(form, query url.Values) ([]byte, error) {
	data := form.Get("data")
	if data == "" {
		data = query.Get("data")
	}
	if data == "" {
		return nil, fmt.Errorf("%w: missing data parameter", errBadBody)
	}
	trimmed := strings.TrimSpace(data)
	if strings.HasPrefix(trimmed, "[") || strings.HasPrefix(trimmed, "{") {
		return []byte(trimmed), nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(trimmed); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: data is neither JSON nor base64-encoded JSON", errBadBody)
}

// formBody reports whether a body is form-encoded whatever its
// Content-Type says: navigator.sendBeacon (mixpanel-browser's transport on
// page unload) posts "data=…" as text/plain, and some clients send no
// type. A JSON body starts with '[' or '{', never with a form field.
func formBody(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] == '[' || t[0] == '{' {
		return false
	}
	return bytes.HasPrefix(t, []byte("data=")) || bytes.Contains(t, []byte("&data="))
}

func isForm(r *http.Request) bool {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	return strings.HasPrefix(ct, "application/x-www-form-urlencoded")
}

func isNDJSON(r *http.Request) bool {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	return strings.HasPrefix(ct, "application/x-ndjson") || strings.HasPrefix(ct, "application/jsonl")
}
