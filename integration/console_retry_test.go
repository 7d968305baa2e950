package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The console's retry check: an import whose source fails once and then
// succeeds. It reads an NDJSON file (an in-memory DuckDB source under
// allowed_paths) that holds garbage when the run starts, a transient error
// (DuckDB's invalid input); once the server logs the retry, the file gets
// good rows, and the next attempt succeeds.

const retryImport = "console-retry"

// consoleRetryImport writes the import over file and returns the file's
// directory, which the server must list in allowed_paths.
func consoleRetryImport(t *testing.T, imports, root string) (file string) {
	t.Helper()
	dir := filepath.Join(root, "files")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "retry-events.json")
	spec := fmt.Sprintf(`id: %s
project_id: %d
import_type: event_stream
sync_mode: time_based
source: {kind: duckdb}
table_params: {query: "SELECT * FROM read_json('%s', format = 'newline_delimited', columns = {id: 'VARCHAR', ev: 'VARCHAR', t: 'TIMESTAMP', u: 'VARCHAR'})"}
event_column_name: ev
time_column_name: t
user_column_name: u
insert_id_column_name: id
insert_time_column_name: t
schedule: api
`, retryImport, mainID, file)
	if err := os.WriteFile(filepath.Join(imports, retryImport+".yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// retriedRun runs the retry import: garbage first, good rows once the
// server has logged the retry. It returns the run's id after checking
// that its history records the retry and its cause.
func retriedRun(t *testing.T, s *server, file string) string {
	t.Helper()
	writeFile := func(body string) {
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil { // atomically: a read sees one or the other
			t.Fatal(err)
		}
	}
	writeFile("this is not JSON\n")
	id := manualSync(t, s, retryImport)
	deadline := time.Now().Add(time.Minute)
	for !retryLogged(s.logs.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no retry of %s logged within a minute", retryImport)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var rows strings.Builder
	for i := range 50 {
		fmt.Fprintf(&rows, `{"id":"retry-%d","ev":"Retried","t":"2026-01-01 00:00:%02d","u":"u%d"}`+"\n", i, i, i%5)
	}
	writeFile(rows.String())
	if r := waitRun(t, s, retryImport, id); r.Status != "SUCCEEDED" || r.Imported != 50 {
		t.Fatalf("the retried run: %+v, want SUCCEEDED with 50 imported", r)
	}
	res := s.do(t, request{Method: http.MethodGet, Path: importPath(retryImport) + "/history", Auth: asOwner})
	var body struct {
		Results struct {
			Runs []struct {
				RunID   string `json:"run_id"`
				Retries []struct {
					At    int64  `json:"at"`
					Error string `json:"error"`
				} `json:"retries"`
				Failures json.RawMessage `json:"failures"`
			} `json:"runs"`
		} `json:"results"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil || len(body.Results.Runs) != 1 {
		t.Fatalf("history of %s: %s (%v)", retryImport, res.Body, err)
	}
	run := body.Results.Runs[0]
	if len(run.Retries) == 0 || !strings.Contains(run.Retries[0].Error, "JSON") || run.Retries[0].At < time.Now().Add(-5*time.Minute).Unix() {
		t.Fatalf("the run's retries: %+v, want the malformed-JSON error and its time", run.Retries)
	}
	if string(run.Failures) != "[]" {
		t.Fatalf("the run's failures: %s, want []", run.Failures)
	}
	return id
}

func retryLogged(logs string) bool {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "transient source error, retrying") && strings.Contains(l, retryImport) {
			return true
		}
	}
	return false
}
