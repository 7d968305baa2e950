package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// DELETE with {"delete_data":true} removes the events the import stored
// and nothing else; the import is gone, and the same rows imported again
// (their dedup keys freed) are stored again. A repeat finds no import.
func TestAppAPIDeleteImportData(t *testing.T) {
	const rows = 3000
	db := newPGDB(t)
	db.eventTable(t, rows)
	s := syncServer(t, db)
	if r := waitRun(t, s, syncImport, manualSync(t, s, syncImport)); r.Status != "SUCCEEDED" || r.Imported != rows {
		t.Fatalf("the first sync: %+v", r)
	}
	// Events from elsewhere, one of them naming the import only inside an
	// object: they stay.
	mine := events("kept", 4)
	mine = append(mine, event("kept", "u-x", uid("n"), time.Now().Add(-time.Hour), map[string]any{"nested": map[string]any{"$warehouse_import_id": syncImport}}))
	wantImported(t, s.importEvents(t, asOwner, projectQ(mainID), mine), len(mine))
	if lines, _ := exportIDs(t, s); lines != rows+len(mine) {
		t.Fatalf("export before the deletion holds %d events, want %d", lines, rows+len(mine))
	}

	del := s.do(t, request{Method: http.MethodDelete, Path: importPath(syncImport), Auth: asOwner, Body: []byte(`{"delete_data":true}`)})
	if del.Status != http.StatusOK || !strings.Contains(string(del.Body), `"status":"ok"`) {
		t.Fatalf("delete with data: %s", del)
	}
	if r := s.do(t, request{Method: http.MethodGet, Path: importPath(syncImport), Auth: asOwner}); r.Status != http.StatusNotFound {
		t.Fatalf("deleted import: %s, want 404", r)
	}
	if r := s.do(t, request{Method: http.MethodDelete, Path: importPath(syncImport), Auth: asOwner, Body: []byte(`{"delete_data":true}`)}); r.Status != http.StatusNotFound {
		t.Fatalf("second delete: %s, want 404", r)
	}
	lines, perID := exportIDs(t, s)
	if lines != len(mine) {
		t.Fatalf("export after the deletion holds %d events, want the %d imported elsewhere", lines, len(mine))
	}
	for _, id := range insertIDs(mine) {
		if perID[id] != 1 {
			t.Fatalf("event %s imported elsewhere was deleted (export: %v)", id, perID)
		}
	}

	// The same table through a new import: every row is stored again,
	// which it would not be had the old events' keys stayed behind.
	created := s.do(t, request{Path: fmt.Sprintf("/api/app/projects/%d/warehouse-sources/imports/event-stream", mainID), Auth: asOwner, Body: createBody("")})
	var c struct{ Results map[string]any }
	if created.Status != http.StatusOK || json.Unmarshal(created.Body, &c) != nil {
		t.Fatalf("create: %s", created)
	}
	id := fmt.Sprint(c.Results["id"])
	if r := waitRun(t, s, id, manualSync(t, s, id)); r.Status != "SUCCEEDED" || r.Imported != rows || r.Duplicates != 0 {
		t.Fatalf("re-import after the deletion: %+v, want %d imported, 0 duplicates", r, rows)
	}
	if lines, _ := exportIDs(t, s); lines != rows+len(mine) {
		t.Fatalf("export after the re-import holds %d events, want %d", lines, rows+len(mine))
	}
	// The deletion survives a restart (nothing comes back from a log).
	s.Restart()
	if lines, _ := exportIDs(t, s); lines != rows+len(mine) {
		t.Fatalf("export after a restart holds %d events, want %d", lines, rows+len(mine))
	}
}
