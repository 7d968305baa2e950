package postgres

import (
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
)

// The example import file parses, keeps its DSN in the environment and
// passes the kind's field checks.
func TestExampleImport(t *testing.T) {
	reg := connectors.NewRegistry(Kind())
	env := func(name string) (string, bool) {
		return "postgres://reader:secret@db.internal:5432/shop?sslmode=verify-full", name == "ORDERS_PG_DSN"
	}
	im, err := importspec.LoadFile("../../configs/examples/postgres-orders.yaml", reg, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Validate(im.SourceConfig()); err != nil {
		t.Fatal(err)
	}
	if im.Source["dsn"] == "${ORDERS_PG_DSN}" {
		t.Fatal("the DSN was not taken from the environment")
	}
}
