// Package api serves the ingestion HTTP interface: /import, raw export,
// OAuth tokens, health and metrics. Response bodies follow the public API's
// shapes exactly, because real SDKs decode them.
package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tributary-dev/tributary/ingest/record"
)

// errorBody is the {"code","error","status"} shape of every /import error.
type errorBody struct {
	Code   int    `json:"code"`
	Error  string `json:"error"`
	Status string `json:"status"`
}

type strictOK struct {
	Code     int    `json:"code"`
	Imported int    `json:"num_records_imported"`
	Status   string `json:"status"`
}

// lenientOK answers a strict=0 JSON request in which some records
// failed: the documented 200 body plus the records that were dropped.
type lenientOK struct {
	Code     int              `json:"code"`
	Imported int              `json:"num_records_imported"`
	Status   string           `json:"status"`
	Failed   []record.Failure `json:"failed_records"`
}

type strictInvalid struct {
	Code     int              `json:"code"`
	Error    string           `json:"error"`
	Status   string           `json:"status"`
	Imported int              `json:"num_records_imported"`
	Failed   []record.Failure `json:"failed_records"`
}

type legacyVerbose struct {
	Status int     `json:"status"`
	Error  *string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are passed in
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="tributary"`)
	}
	writeJSON(w, status, errorBody{Code: status, Error: msg, Status: statusText(status)})
}

// statusText matches the public API's status strings ("OK", "Bad Request", …).
func statusText(code int) string {
	if code == http.StatusOK {
		return "OK"
	}
	return http.StatusText(code)
}

// writeLegacy answers the way pre-strict SDKs expect: 1/0, or with
// verbose=1 {"status":1,"error":null}. A request whose records were only
// partly valid still has status 1 (the SDKs take 0 for a request that
// failed as a whole), and its error says what failed.
func writeLegacy(w http.ResponseWriter, verbose, ok bool, msg string) {
	if verbose {
		body := legacyVerbose{Status: 1}
		if !ok {
			body.Status = 0
		}
		if msg != "" || !ok {
			body.Error = &msg
		}
		writeJSON(w, http.StatusOK, body)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if ok {
		_, _ = w.Write([]byte("1"))
	} else {
		_, _ = w.Write([]byte("0"))
	}
}
