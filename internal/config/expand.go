package config

import (
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"
)

// secretKey matches the keys that hold secrets (or, for store, a URL that
// may carry a password). ${VAR:-default} is refused there: a forgotten
// variable would silently give the server the default written in the file.
var secretKey = regexp.MustCompile(`^(store|metrics_token|connection_key|projects\[\d+\]\.api_secret|projects\[\d+\]\.service_accounts\[\d+\]\.secret)$`)

// expander resolves ${VAR} in every scalar value on its own, after
// parsing, so a value from the environment cannot change the document's
// structure and a reference in a comment is never resolved.
type expander struct {
	lookup func(string) (string, bool)
	// lenient lets the server's own secrets (secretKey) be unset, for
	// commands that only read imports: a project secret becomes a
	// placeholder, the store embedded.
	lenient bool
}

// expand expands n, whose path is key (e.g. projects[0].api_secret).
func (x expander) expand(n *yaml.Node, key string) error {
	return WalkScalars(n, key, func(n *yaml.Node, key string) error {
		if secretKey.MatchString(key) && HasDefault(n.Value) {
			return bad(key, "line %d: ${VAR:-default} is not accepted for a secret; give ${VAR} and set the variable", n.Line)
		}
		if alertSecretKey.MatchString(key) && (!envRef.MatchString(n.Value) || HasDefault(n.Value)) {
			return bad(key, "line %d: may hold a token, so it is written with ${VAR} (e.g. url: ${SLACK_WEBHOOK_URL}); a literal or ${VAR:-default} is not accepted", n.Line)
		}
		v, err := ExpandEnv(n.Value, x.lookup)
		if err != nil && x.lenient && alertSecretKey.MatchString(key) {
			v, err = "http://unset.invalid/", nil // the variable is for the server only
		}
		if err != nil && x.lenient && secretKey.MatchString(key) {
			v, err = "unset variable "+n.Value, nil
			if key == "store" {
				v = ""
			}
		}
		if err != nil {
			return bad(key, "line %d: %v", n.Line, err)
		}
		SetScalar(n, v)
		return nil
	})
}

// WalkScalars calls f on every scalar value under n with its path (key
// joined with mapping keys by "." and sequence indexes as "[i]"), stopping
// at the first error. Config files and import files expand ${VAR} value by
// value through it.
func WalkScalars(n *yaml.Node, key string, f func(n *yaml.Node, key string) error) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := WalkScalars(c, key, f); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		return f(n, key)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if key != "" {
				k = key + "." + k
			}
			if err := WalkScalars(n.Content[i+1], k, f); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := WalkScalars(c, fmt.Sprintf("%s[%d]", key, i), f); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetScalar gives a scalar node an expanded value: untagged and plain, so
// the encoder quotes whatever would not read back as written, and numbers
// stay numbers.
func SetScalar(n *yaml.Node, v string) {
	if v != n.Value {
		n.Value, n.Tag, n.Style = v, "", 0
	}
}
