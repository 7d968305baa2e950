package snowflake

import (
	"testing"

	"github.com/tributary-dev/tributary/connectors"
	"github.com/tributary-dev/tributary/engine/importspec"
)

// The example import file parses, keeps its secret in the environment
// and passes the kind's field checks.
func TestExampleImport(t *testing.T) {
	reg := connectors.NewRegistry(Kind())
	env := func(name string) (string, bool) {
		return "-----BEGIN PRIVATE KEY-----", name == "SNOWFLAKE_PRIVATE_KEY"
	}
	im, err := importspec.LoadFile("../../configs/examples/snowflake-events.yaml", reg, env)
	if err != nil {
		t.Fatal(err)
	}
	cfg := connectors.Config{Kind: im.Source["kind"], Fields: map[string]string{}}
	for k, v := range im.Source {
		if k != "kind" {
			cfg.Fields[k] = v
		}
	}
	if err := reg.Validate(cfg); err != nil {
		t.Fatal(err)
	}
}
