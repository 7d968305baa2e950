package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors/duckdb"
)

// demoDir seeds the demo warehouse in a temp dir and returns the dir and
// the server config path; import files refer to ./data/demo-warehouse.duckdb
// relative to the working directory, so tests chdir there.
func demoDir(t *testing.T) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := duckdb.SeedDemo(context.Background(), filepath.Join(dir, "data", "demo-warehouse.duckdb")); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	for _, f := range []string{"configs/tributary.yaml", "configs/imports/demo-events.yaml", "configs/imports/demo-users.yaml"} {
		b, err := os.ReadFile(filepath.Join(wd, "..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	// The demo config takes its secrets from the environment (`make run`
	// exports these demo-only values).
	for k, v := range map[string]string{"TRIBUTARY_DEMO_SECRET": "demo-api-secret",
		"TRIBUTARY_DEMO_SA_SECRET": "demo-sa-secret", "TRIBUTARY_DEMO_ANALYST_SECRET": "demo-analyst-secret"} {
		t.Setenv(k, v)
	}
	return dir
}

func TestPreviewDemoEvents(t *testing.T) {
	demoDir(t)
	var out, errOut bytes.Buffer
	if err := previewCmd(context.Background(), []string{"-c", "configs/imports/demo-events.yaml", "--limit", "5"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, want := range []string{"Records (5 mapped from 5 rows read)", `"$warehouse_import_id":"demo-events"`,
		"experiment.arm", "shipping", "flattened", "Amount", "renamed", "internal_note", "excluded", "No problems"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("preview output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := previewCmd(context.Background(), []string{"-c", "configs/imports/demo-users.yaml", "--format", "ndjson", "--limit", "3"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 3 || !strings.Contains(out.String(), `"$set":{`) {
		t.Fatalf("ndjson people preview:\n%s", out.String())
	}
}

func TestPreviewRefusesBadColumns(t *testing.T) {
	dir := demoDir(t)
	bad := filepath.Join(dir, "configs/imports/bad.yaml")
	b, _ := os.ReadFile(filepath.Join(dir, "configs/imports/demo-events.yaml"))
	text := strings.Replace(string(b), "time_column_name: event_time", "time_column_name: event_tme", 1)
	text = strings.Replace(text, "insert_time_column_name: loaded_at", "insert_time_column_name: props", 1)
	os.WriteFile(bad, []byte(text), 0o644)
	var out, errOut bytes.Buffer
	err := previewCmd(context.Background(), []string{"-c", bad}, &out, &errOut)
	if err == nil {
		t.Fatal("preview of an invalid import exited 0")
	}
	for _, want := range []string{`bad.yaml: time_column_name: column "event_tme": no such column in main.app_events`,
		`bad.yaml: insert_time_column_name: column "props": is JSON; the insert-time column must be a timestamp, date or integer`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestValidateWithoutConnecting(t *testing.T) {
	dir := demoDir(t)
	os.Remove(filepath.Join(dir, "data", "demo-warehouse.duckdb")) // nothing to connect to
	var out, errOut bytes.Buffer
	if err := validate([]string{"-c", "configs/imports/demo-events.yaml"}, &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("id: x\nproject_id: 9\nimport_type: people\nsync_mode: full_sync\nsource: {kind: duckdb}\ntable_params: {table: t}\n"), 0o644)
	err := validate([]string{"-c", bad}, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "bad.yaml: project_id: no project 9") ||
		!strings.Contains(errOut.String(), "bad.yaml: user_column_name: is required for people imports") {
		t.Fatalf("err %v, stderr:\n%s", err, errOut.String())
	}
}

// TestSourcesTest: the check connects, describes and reads one row of the
// demo table, and classifies a missing table as a permanent problem.
func TestSourcesTest(t *testing.T) {
	dir := demoDir(t)
	var out, errOut bytes.Buffer
	if err := sourcesTest(context.Background(), []string{"test", "-c", "configs/imports/demo-events.yaml"}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	for _, want := range []string{"ok    connect", "ok    discover", "ok    columns", "ok    read",
		"duckdb source, main.app_events", "1 sample row(s) read", "event_time"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "configs/imports/demo-events.yaml"))
	missing := filepath.Join(dir, "configs/imports/missing.yaml")
	os.WriteFile(missing, []byte(strings.Replace(string(b), "main.app_events", "main.no_such_table", 1)), 0o644)
	out.Reset()
	if err := sourcesTest(context.Background(), []string{"test", "-c", missing}, &out, &errOut); err == nil {
		t.Fatalf("a missing table passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "FAIL  discover") || !strings.Contains(out.String(), "permanent") {
		t.Errorf("missing table not reported as a permanent discover failure:\n%s", out.String())
	}
}
