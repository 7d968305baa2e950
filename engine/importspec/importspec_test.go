package importspec_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/connectors/duckdb"
	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/internal/config"
)

var update = flag.Bool("update", false, "rewrite docs/import.schema.json")

func registry() *connectors.Registry {
	secret := connectors.Kind{Name: "warehouse", Fields: []connectors.Field{{Name: "password", Secret: true}, {Name: "host", Required: true}}}
	return connectors.NewRegistry(duckdb.Kind(), secret)
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const good = `id: demo-events
project_id: 1
import_type: event_stream
sync_mode: time_based
source: {kind: duckdb, path: "${WH_PATH}"}
table_params: {table: main.app_events}
time_column_name: event_time
user_column_name: user_id
insert_time_column_name: loaded_at
schedule: "@every 15m"
`

func TestParseGoodAndDefaults(t *testing.T) {
	im, err := importspec.Parse("x.yaml", []byte(good), registry(), env(map[string]string{"WH_PATH": "/w/wh.duckdb"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(registry(), func(int64) (importspec.Project, bool) {
		return importspec.Project{ID: 1, Mode: config.IDSimplified}, true
	}); err != nil {
		t.Fatal(err)
	}
	if im.Source["path"] != "/w/wh.duckdb" || im.Event() != "app_events" {
		t.Fatalf("path %q, default event %q", im.Source["path"], im.Event())
	}
}

func TestErrorsNameFileKeyAndColumn(t *testing.T) {
	simplified := func(int64) (importspec.Project, bool) {
		return importspec.Project{ID: 1, Mode: config.IDSimplified}, true
	}
	original := func(int64) (importspec.Project, bool) {
		return importspec.Project{ID: 1, Mode: config.IDOriginal}, true
	}
	for _, tc := range []struct {
		name, edit, want string
		project          func(int64) (importspec.Project, bool)
	}{
		{"unknown key", "colour: red\n", "x.yaml: colour: unknown key (line 11)", simplified},
		{"bad type", "", "x.yaml: import_type: \"events\": must be one of", simplified},
		{"mirror option elsewhere", "max_deletes: 5\n", "x.yaml: max_deletes: applies to sync_mode mirror only", simplified},
		{"mirror ratio", "max_change_ratio: 2\n", "x.yaml: max_change_ratio: 2: must be between 0 (no limit) and 1", simplified},
		{"time_based without insert time", "", "x.yaml: insert_time_column_name: is required for sync_mode time_based", simplified},
		{"unknown source kind", "", "x.yaml: source.kind: unknown kind \"oracle\"", simplified},
		{"bad schedule", "", "x.yaml: schedule: \"every hour\":", simplified},
		{"user column on original", "", "x.yaml: user_column_name: is for Simplified ID Merge projects", original},
		{"distinct id on simplified", "distinct_id_column_name: uid\n", "x.yaml: distinct_id_column_name: is for Original ID Merge projects", simplified},
		{"history into original", "migrated_from: amplitude\n", "x.yaml: migrated_from: another tool's history (amplitude) can only be imported into a Simplified ID Merge project", original},
		{"unset env", "", "x.yaml: source.path: environment variable WH_PATH is not set", simplified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := good + tc.edit
			lookup := env(map[string]string{"WH_PATH": "/w"})
			switch tc.name {
			case "bad type":
				text = strings.Replace(text, "event_stream", "events", 1)
			case "mirror ratio":
				text = strings.Replace(text, "time_based", "mirror", 1)
			case "time_based without insert time":
				text = strings.Replace(text, "insert_time_column_name: loaded_at\n", "", 1)
			case "unknown source kind":
				text = strings.Replace(text, "kind: duckdb", "kind: oracle", 1)
			case "bad schedule":
				text = strings.Replace(text, "@every 15m", "every hour", 1)
			case "unset env":
				lookup = env(nil)
			}
			im, err := importspec.Parse("x.yaml", []byte(text), registry(), lookup)
			if err == nil {
				err = im.Validate(registry(), tc.project)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSecretsOnlyFromEnvironment(t *testing.T) {
	lit := "id: x\nsource: {kind: warehouse, host: h, password: hunter2}\n"
	_, err := importspec.Parse("s.yaml", []byte(lit), registry(), env(nil))
	if err == nil || !strings.Contains(err.Error(), "s.yaml: source.password: is a secret") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("literal secret: %v", err)
	}
	// A secret with YAML syntax in it stays one value.
	ref := "id: x\nsource: {kind: warehouse, host: h, password: \"${PW}\"}\n"
	im, err := importspec.Parse("s.yaml", []byte(ref), registry(), env(map[string]string{"PW": "a: b, {c}"}))
	if err != nil || im.Source["password"] != "a: b, {c}" {
		t.Fatalf("env secret: %v %q", err, im.Source["password"])
	}
}

func TestDemoImportsValidate(t *testing.T) {
	for k, v := range map[string]string{"TRIBUTARY_DEMO_SECRET": "demo-api-secret",
		"TRIBUTARY_DEMO_SA_SECRET": "demo-sa-secret", "TRIBUTARY_DEMO_ANALYST_SECRET": "demo-analyst-secret"} {
		t.Setenv(k, v) // as `make run` does
	}
	cfg, err := config.Load("../../configs/tributary.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conns, err := importspec.NewConnections(cfg.Connections, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	ims, err := importspec.Loader{Registry: kinds.Registry(), Connections: conns}.Dir("../../configs/imports")
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) < 4 {
		t.Fatalf("%d demo imports, want one per import type", len(ims))
	}
	for _, im := range ims {
		if err := im.Validate(connectors.NewRegistry(duckdb.Kind()), func(int64) (importspec.Project, bool) {
			return importspec.Project{ID: 1, Mode: config.IDSimplified}, true
		}); err != nil {
			t.Error(err)
		}
	}
}

// The published schema is generated; this keeps the file in step.
func TestJSONSchemaUpToDate(t *testing.T) {
	got, err := importspec.JSONSchema(kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "import.schema.json")
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("docs/import.schema.json is stale (go test ./engine/importspec -update): %v", err)
	}
}
