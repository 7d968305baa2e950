package scheduler

import (
	"bytes"
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
		return importspec.Project{ID: id, Mode: config.IDSimplified}, id == 1
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
	// Its id stays taken: a new import must not inherit its runs.
	if _, err := c.Create(ctx, 1, importspec.People, []byte(`{"id":"1","warehouse_source_id":"wh","sync_mode":"full_sync","table_params":{"table":"u"},"user_column_name":"id"}`), "sa"); !errors.Is(err, ErrExists) {
		t.Fatalf("reusing a left-out id: %v", err)
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
	if err != nil || e.Import.ID != "2" || e.Import.SourceKind() != "duckdb" || e.Import.SourceConfig().Fields["path"] != "/srv/wh.duckdb" {
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

// Connections created through the API: a Postgres server the operator
// allows, the password sealed in the store and never shown, reopened at
// the next start with the key (and left out without it).
func TestCatalogAPIConnections(t *testing.T) {
	ctx := context.Background()
	st, err := duckstore.Open(ctx, filepath.Join(t.TempDir(), "store.duckdb"), duckstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg, err := config.Parse("c.yaml", []byte(`projects:
  - {id: 1, name: A, token: tok-aaaaaaaa, api_secret: sec-aaaaaaaa}
  - {id: 2, name: B, token: tok-bbbbbbbb, api_secret: sec-bbbbbbbb}
connections:
  - {id: "7", kind: duckdb, path: /srv/wh.duckdb, projects: [1]}
connection_key: "`+strings.Repeat("ab", 32)+`"
connection_hosts_allowed: ["db.internal:5432", "replica.internal"]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	projects := func(id int64) (importspec.Project, bool) {
		return importspec.Project{ID: id, Mode: config.IDSimplified}, id <= 2
	}
	open := func(key []byte) *Catalog {
		conns, err := importspec.NewConnections(cfg.Connections, kinds.Registry())
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCatalog(ctx, CatalogOptions{Store: st, Registry: kinds.Registry(), Projects: projects,
			Connections: conns, ConnectionKey: key, HostAllowed: cfg.HostAllowed})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open(cfg.ConnectionKeyBytes())
	good := `{"kind":"postgres","host":"db.internal","user":"r","password":"pw-hunter2","database":"wh"`
	for _, tc := range []struct{ name, body, want string }{
		{"host not allowed", `{"kind":"postgres","host":"127.0.0.1","port":"22","user":"r","password":"pw-hunter2","database":"wh"}`, `host: "127.0.0.1" port 22 is not among the hosts`},
		{"port not allowed", good + `,"port":5433}`, `host: "db.internal" port 5433`},
		{"dsn", `{"kind":"postgres","dsn":"postgres://r:pw-hunter2@db.internal/wh"}`, "dsn: not a field of a connection created through the API"},
		{"file on the server", good + `,"sslrootcert":"/etc/ssl/x.pem"}`, "sslrootcert: not a field"},
		{"duckdb", `{"kind":"duckdb","path":"/srv/wh.duckdb"}`, "path: not a field"},
		{"snowflake", `{"kind":"snowflake","host":"db.internal","user":"r","password":"x","database":"d"}`, "kind: connections created through the API are postgres"},
		{"no password", `{"kind":"postgres","host":"db.internal","user":"r","database":"wh"}`, "password: is required"},
		{"bad sslmode", good + `,"sslmode":"prefer"}`, "sslmode"},
	} {
		if _, err := c.CreateConnection(ctx, 2, []byte(tc.body), "owner"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want ErrInvalid and %q", tc.name, err, tc.want)
		}
	}
	v, err := c.CreateConnection(ctx, 2, []byte(good+`,"port":"5432"}`), "owner")
	if err != nil || v.ID != "8" || v.Fields["password"] != "" || len(v.Secrets) != 1 || v.Secrets[0] != "password" {
		t.Fatalf("create: %v %+v", err, v)
	}
	if v2, err := c.CreateConnection(ctx, 2, []byte(`{"kind":"postgres","host":"replica.internal","port":6543,"user":"r","password":"p","database":"wh"}`), "owner"); err != nil || v2.ID != "9" {
		t.Fatalf("any port of an allowed host: %v %+v", err, v2)
	}
	docs, err := st.ImportDocs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if strings.Contains(string(d.Doc), "pw-hunter2") {
			t.Fatalf("the store holds the password in clear: %s", d.Doc)
		}
	}
	// Project 2 sees its own; project 1 the config's.
	if l := c.Connections(2); len(l) != 2 || l[0].ID != "8" || l[0].Origin != OriginAPI {
		t.Fatalf("project 2's connections: %+v", l)
	}
	if l := c.Connections(1); len(l) != 1 || l[0].ID != "7" || l[0].Fields != nil {
		t.Fatalf("project 1's connections: %+v", l)
	}
	body := `{"sync_mode":"full_sync","table_params":{"table":"u"},"user_column_name":"id","warehouse_source_id":8}`
	e, err := c.Create(ctx, 2, importspec.People, []byte(body), "owner")
	if err != nil || e.Import.SourceConfig().Fields["password"] != "pw-hunter2" {
		t.Fatalf("import on the API connection: %v", err)
	}
	if _, err := c.Create(ctx, 1, importspec.People, []byte(body), "owner"); err == nil || !strings.Contains(err.Error(), "no such connection") {
		t.Fatalf("project 1 named project 2's connection: %v", err)
	}
	if err := c.DeleteConnection(ctx, 2, "8"); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete in use: %v", err)
	}
	if err := c.DeleteConnection(ctx, 1, "7"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete a config connection: %v", err)
	}

	// The next start opens the password with the key...
	c = open(cfg.ConnectionKeyBytes())
	if got, ok := c.Get(2, e.Import.ID); !ok || got.Import.SourceConfig().Fields["password"] != "pw-hunter2" {
		t.Fatalf("after a restart: %+v %v", got.Import, ok)
	}
	// ...and without it (or with another) leaves the connection and its
	// imports out, still starting.
	c = open(bytes.Repeat([]byte{7}, 32))
	if _, ok := c.Get(2, e.Import.ID); ok {
		t.Fatal("an import loaded on a connection whose password does not open")
	}
	if _, err := open(nil).CreateConnection(ctx, 2, []byte(good+"}"), "owner"); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("without connection_key: %v", err)
	}
	c = open(cfg.ConnectionKeyBytes())
	if _, err := c.Delete(ctx, 2, e.Import.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteConnection(ctx, 2, "8"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if l := open(cfg.ConnectionKeyBytes()).Connections(2); len(l) != 1 || l[0].ID != "9" {
		t.Fatalf("after delete: %+v", l)
	}
}
