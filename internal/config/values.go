package config

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ByteSize accepts 1048576, "512KB", "10MB", "2GB" (powers of 1024).
type ByteSize int64

func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(strings.ToUpper(n.Value))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a size (examples: 1048576, 10MB, 2GB)", n.Line, n.Value)
	}
	*b = ByteSize(v * mult)
	return nil
}

// Duration accepts Go durations such as "90s" or "1h".
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (examples: 30s, 15m, 1h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// ExpandEnv resolves ${VAR} and ${VAR:-default} in one value; an unset
// variable without a default is an error naming it.
func ExpandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var firstErr error
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		if v, ok := lookup(sub[1]); ok && v != "" {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("environment variable %s is not set", sub[1])
		}
		return ""
	})
	return out, firstErr
}

// IsEnvRef reports whether s is exactly one ${VAR} reference, the only
// form a secret may take in a file. ${VAR:-default} is not one: a
// forgotten variable would silently give every deployment the default
// written in the file.
func IsEnvRef(s string) bool {
	s = strings.TrimSpace(s)
	m := envRef.FindStringSubmatchIndex(s)
	return m != nil && m[0] == 0 && m[1] == len(s) && m[4] < 0
}

// HasDefault reports whether s holds a ${VAR:-default} reference.
func HasDefault(s string) bool {
	for _, m := range envRef.FindAllStringSubmatch(s, -1) {
		if m[2] != "" {
			return true
		}
	}
	return false
}

// RefuseAliases refuses YAML aliases (*name) and merge keys (<<) under n.
// Every value must be written where it is used, so the checks that look
// at a key's value (a secret must be ${VAR}) see what the key gets.
func RefuseAliases(n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return fmt.Errorf("line %d: YAML aliases (*%s) are not accepted: write the value where it is used", n.Line, n.Value)
	case yaml.DocumentNode, yaml.MappingNode, yaml.SequenceNode:
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 0 && c.Kind == yaml.ScalarNode && c.Tag == "!!merge" {
				return fmt.Errorf("line %d: YAML merge keys (<<) are not accepted: write the keys where they are used", c.Line)
			}
			if err := RefuseAliases(c); err != nil {
				return err
			}
		}
	}
	return nil
}
