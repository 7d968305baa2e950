package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Mirror import whose source table is truncated, under volume action:
// pause: the run is held before it deletes anything (the export keeps
// every event), the import is paused with one alert, and once resumed
// the next run deletes what the table no longer holds.
func TestAlertVolumePausesTruncatedMirror(t *testing.T) {
	db := newPGDB(t)
	db.eventTable(t, 30)
	hook := newAlertReceiver(t)
	t.Setenv("TRIBUTARY_IT_ALERT_URL", hook.srv.URL+"/tributary")
	t.Setenv("TRIBUTARY_IT_MIRROR_DSN", db.dsn)
	dir := t.TempDir()
	spec := fmt.Sprintf(`id: ev-mirror
project_id: %d
import_type: event_stream
sync_mode: mirror
source: {kind: postgres, dsn: "${TRIBUTARY_IT_MIRROR_DSN}"}
table_params: {table: ev}
event_name: purchase
time_column_name: event_time
user_column_name: user_id
schedule: api
`, mainID)
	if err := os.WriteFile(filepath.Join(dir, "ev.yaml"), []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.ImportsDir = dir
	cfg.Projects[0].Alerts = map[string]any{
		"destinations": []map[string]any{{"name": "hook", "kind": "webhook", "url": "${TRIBUTARY_IT_ALERT_URL}"}},
		"rules":        map[string]any{"volume": map[string]any{"min_runs": 2, "action": "pause"}},
	}
	s := startServer(t, cfg)
	for i := 0; i < 2; i++ {
		if r := waitRun(t, s, "ev-mirror", manualSync(t, s, "ev-mirror")); r.Status != "SUCCEEDED" {
			t.Fatalf("run %d: %+v", i, r)
		}
		time.Sleep(2100 * time.Millisecond) // past the join window
	}
	db.exec(t, `DELETE FROM ev`)
	r := waitRun(t, s, "ev-mirror", manualSync(t, s, "ev-mirror"))
	if r.Status != "CANCELLED" || !strings.Contains(r.Reason, "volume anomaly") {
		t.Fatalf("run on the truncated table: %+v", r)
	}
	if lines, _ := exportIDs(t, s); lines != 30 {
		t.Fatalf("export holds %d events after the held run, want all 30", lines)
	}
	for _, h := range mirrorHistory(t, s, "ev-mirror") {
		if h.RunID == r.RunID && h.Mirror != nil && h.Mirror.Deleted != 0 {
			t.Fatalf("the held run deleted %d", h.Mirror.Deleted)
		}
	}
	hook.waitKind(t, "volume_anomaly")
	if rep := s.do(t, request{Method: http.MethodPatch, Path: importPath("ev-mirror"), Auth: asOwner, Body: []byte(`{"paused":false}`)}); rep.Status != http.StatusOK {
		t.Fatalf("resume: %s", rep)
	}
	// Resumed: the operator accepted the empty table.
	if r := waitRun(t, s, "ev-mirror", manualSync(t, s, "ev-mirror")); r.Status != "SUCCEEDED" {
		t.Fatalf("run after resuming: %+v", r)
	}
	if lines, _ := exportIDs(t, s); lines != 0 {
		t.Fatalf("export holds %d events after the resumed run, want none", lines)
	}
}
