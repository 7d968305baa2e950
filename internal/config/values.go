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

// interpolate replaces ${VAR} and ${VAR:-default}. A missing variable
// without a default is an error naming the line, so secrets never silently become "".
func interpolate(text string, lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var firstErr error
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		lines[i] = envRef.ReplaceAllStringFunc(line, func(m string) string {
			sub := envRef.FindStringSubmatch(m)
			if v, ok := lookup(sub[1]); ok && v != "" {
				return v
			}
			if sub[2] != "" {
				return sub[3]
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("line %d: environment variable %s is not set", i+1, sub[1])
			}
			return ""
		})
	}
	return strings.Join(lines, "\n"), firstErr
}

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
// form a secret may take in a config file.
func IsEnvRef(s string) bool {
	loc := envRef.FindStringIndex(strings.TrimSpace(s))
	return loc != nil && loc[0] == 0 && loc[1] == len(strings.TrimSpace(s))
}
