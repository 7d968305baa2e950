package scheduler

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
	"github.com/tributary-dev/tributary/ingest/store"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/internal/config"
)

// The catalog holds API imports to the server's connections and the
// schedule floor, and still loads what an older version stored.
func TestCatalogConnectionsAndFloor(t *testing.T) {
	ctx := context.Background()
	st, err := duckstore.Open(ctx, filepath.Join(t.TempDir(), "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg, err := config.Parse("c.yaml", []byte(`projects:
  - {id: 1, name: A, token: tok-aaaaaaaa, api_secret: sec-aaaaaaaa}
connections:
  - {id: wh, kind: duckdb, path: /srv/wh.duckdb}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	conns, err := importspec.NewConnections(cfg.Connections, kinds.Registry())
	if err != nil {
		t.Fatal(err)
	}
	file, err := importspec.Loader{Registry: kinds.Registry(), Connections: conns}.Parse("f.yaml", []byte(
		"id: f\nproject_id: 1\nimport_type: people\nsync_mode: full_sync\nsource: {connection: wh}\ntable_params: {table: u}\nuser_column_name: id\nschedule: '@hourly'\n"))
	if err != nil {
		t.Fatal(err)
	}
	// What an older version stored: an API import with an inline source
	// and a PATCH of the file import to every second.
	for _, d := range []store.ImportDoc{
		{Project: 1, ID: "1", Doc: []byte(`{"origin":"api","spec":{"id":"1","project_id":1,"import_type":"people","sync_mode":"full_sync","source":{"kind":"duckdb"},"table_params":{"query":"SELECT 1 AS id"},"user_column_name":"id"}}`)},
		{Project: 1, ID: "f", Doc: []byte(`{"origin":"file","schedule":"@every 1s"}`)},
	} {
		if err := st.PutImportDoc(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	projects := func(id int64) (importspec.Project, bool) {
		return importspec.Project{ID: id, Simplified: true}, id == 1
	}
	open := func(floor time.Duration) *Catalog {
		c, err := NewCatalog(ctx, CatalogOptions{Store: st, Registry: kinds.Registry(), Projects: projects,
			Files: []*importspec.Import{file}, Connections: conns, MinInterval: floor})
		if err != nil {
			t.Fatalf("the catalog must load what an older version stored: %v", err)
		}
		return c
	}
	c := open(0)
	if _, ok := c.Get(1, "1"); ok {
		t.Fatal("a stored API import with an inline source was loaded")
	}
	if e, ok := c.Get(1, "f"); !ok || e.Schedule() != "@hourly" {
		t.Fatalf("file import: %+v, want its own schedule (the stored one is under the floor)", e.Import)
	}

	body := `{"sync_mode":"full_sync","table_params":{"table":"u"},"user_column_name":"id",`
	for _, tc := range []struct{ name, body, want string }{
		{"inline source", body + `"source":{"kind":"duckdb","path":"/etc/x.duckdb"}}`, "source: imports created through the API cannot declare a source"},
		{"no connection", body + `"schedule":"api"}`, "warehouse_source_id: is required"},
		{"under the floor", body + `"warehouse_source_id":"wh","schedule":"@every 30s"}`, `schedule: "@every 30s" runs more often than every 1m0s`},
	} {
		if _, err := c.Create(ctx, 1, importspec.People, []byte(tc.body), "sa"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid and %q", tc.name, err, tc.want)
		}
	}
	e, err := c.Create(ctx, 1, importspec.People, []byte(body+`"warehouse_source_id":"wh"}`), "sa")
	if err != nil || e.Import.SourceKind() != "duckdb" || e.Import.SourceConfig().Fields["path"] != "/srv/wh.duckdb" {
		t.Fatalf("create: %v %+v", err, e.Import)
	}
	for _, sc := range []string{"@every 1s", "@every 0s", "@every -5m", "*/1 * * * * *"} {
		if _, err := c.Patch(ctx, 1, e.Import.ID, nil, &sc); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "schedule: ") {
			t.Errorf("patch %q: %v", sc, err)
		}
	}
	// A lower floor admits what it allows, and reloads keep the API import.
	c = open(time.Second)
	sc := "@every 1s"
	if _, err := c.Patch(ctx, 1, e.Import.ID, nil, &sc); err != nil {
		t.Fatalf("patch under a 1s floor: %v", err)
	}
	if got, ok := open(time.Second).Get(1, e.Import.ID); !ok || got.Schedule() != sc {
		t.Fatalf("reloaded: %+v %v", got, ok)
	}
}
