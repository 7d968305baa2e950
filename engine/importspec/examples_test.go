package importspec_test

import (
	"testing"

	"github.com/tributary-dev/tributary/connectors/kinds"
	"github.com/tributary-dev/tributary/engine/importspec"
)

// Each example import file in configs/examples parses, takes its secret
// from the environment and passes its kind's field checks. (Here, not in
// the connectors: they sit below the import model and do not import it.)
func TestExampleImports(t *testing.T) {
	key := `{"type": "service_account", "project_id": "acme-analytics"}`
	for _, c := range []struct {
		file, envVar, value, field string
	}{
		{"postgres-orders.yaml", "ORDERS_PG_DSN", "postgres://reader:secret@db.internal:5432/shop?sslmode=verify-full", "dsn"},
		{"snowflake-events.yaml", "SNOWFLAKE_PRIVATE_KEY", "-----BEGIN PRIVATE KEY-----", "private_key"},
		{"bigquery-events.yaml", "BIGQUERY_CREDENTIALS_JSON", key, "credentials_json"},
	} {
		t.Run(c.file, func(t *testing.T) {
			reg := kinds.Registry()
			env := func(name string) (string, bool) { return c.value, name == c.envVar }
			im, err := importspec.LoadFile("../../configs/examples/"+c.file, reg, env)
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.Validate(im.SourceConfig()); err != nil {
				t.Fatal(err)
			}
			if im.Source[c.field] != c.value {
				t.Errorf("%s = %q, want the value of $%s", c.field, im.Source[c.field], c.envVar)
			}
		})
	}
}
