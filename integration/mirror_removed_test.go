package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Mirror import on Postgres whose file is removed from imports_dir:
// the next start drops its replication slot and publication (as the app
// API's DELETE does) and says so, while the import still listed keeps
// its own.
// On the embedded store a start drops what a removed Mirror import kept;
// on a shared Postgres store it keeps it (another process may still list
// the import) and logs the SQL that drops the feed.
func TestMirrorFileRemovedDropsFeed(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "embedded"
		if shared {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { mirrorFileRemoved(t, shared) })
	}
}

func mirrorFileRemoved(t *testing.T, shared bool) {
	db := newPGDB(t)
	db.eventTable(t, 20)
	t.Setenv("TRIBUTARY_IT_SYNC_DSN", db.dsn)
	dir := t.TempDir()
	for _, id := range []string{"ev-gone", "ev-kept"} {
		spec := fmt.Sprintf(`id: %s
project_id: %d
import_type: event_stream
sync_mode: mirror
source: {connection: %q}
table_params: {table: ev}
event_name: purchase
time_column_name: event_time
user_column_name: user_id
schedule: api
`, id, mainID, syncConn)
		if err := os.WriteFile(filepath.Join(dir, id+".yaml"), []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := defaultConfig()
	cfg.ImportsDir = dir
	if shared {
		cfg.Store = storeURL(t, newPGDB(t))
	}
	cfg.Connections = append(cfg.Connections, map[string]any{"id": syncConn, "kind": "postgres",
		"dsn": "${TRIBUTARY_IT_SYNC_DSN}", "projects": []int64{mainID}})
	s := startServer(t, cfg)
	for _, id := range []string{"ev-gone", "ev-kept"} {
		if r := waitRun(t, s, id, manualSync(t, s, id)); r.Status != "SUCCEEDED" {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	feeds := func() (slots, pubs []string) {
		t.Helper()
		for q, out := range map[string]*[]string{
			`SELECT slot_name FROM pg_replication_slots WHERE database = current_database() ORDER BY 1`: &slots,
			`SELECT pubname FROM pg_publication ORDER BY 1`:                                             &pubs,
		} {
			rows, err := db.conn.Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				*out = append(*out, n)
			}
			rows.Close()
		}
		return slots, pubs
	}
	gone, kept := fmt.Sprintf("tributary_p%d_ev_gone", mainID), fmt.Sprintf("tributary_p%d_ev_kept", mainID)
	if slots, pubs := feeds(); strings.Join(slots, ",") != gone+","+kept || strings.Join(pubs, ",") != gone+","+kept {
		t.Fatalf("before: slots %v publications %v", slots, pubs)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ev-gone.yaml")); err != nil {
		t.Fatal(err)
	}
	s.Start()
	if shared {
		if slots, pubs := feeds(); strings.Join(slots, ",") != gone+","+kept || strings.Join(pubs, ",") != gone+","+kept {
			t.Fatalf("shared store, after the file's removal: slots %v publications %v, want both kept", slots, pubs)
		}
		if logs := s.logs.String(); !strings.Contains(logs, "pg_drop_replication_slot('"+gone+"')") {
			t.Errorf("the start did not log how to drop the kept feed:\n%s", logs)
		}
		if r := waitRun(t, s, "ev-kept", manualSync(t, s, "ev-kept")); r.Status != "SUCCEEDED" {
			t.Fatalf("ev-kept after the restart: %+v", r)
		}
		return
	}
	if slots, pubs := feeds(); strings.Join(slots, ",") != kept || strings.Join(pubs, ",") != kept {
		t.Fatalf("after the file's removal: slots %v publications %v, want only %s", slots, pubs, kept)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "removed from imports_dir: dropped its state and change feed") || !strings.Contains(logs, gone) {
		t.Errorf("the start did not log what it dropped:\n%s", logs)
	}
	if r := waitRun(t, s, "ev-kept", manualSync(t, s, "ev-kept")); r.Status != "SUCCEEDED" {
		t.Fatalf("ev-kept after the restart: %+v", r)
	}
}
