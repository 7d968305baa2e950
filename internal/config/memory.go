package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MinMemoryLimit is the smallest memory_limit accepted: the Go heap's
// share of less (server.NewMemoryBudget) would not hold a sync's
// batches in flight.
const MinMemoryLimit = 64 << 20

// memoryUnits are memory_limit's suffixes, all powers of 1024 like the
// config's other sizes; DuckDB's KiB/MiB/GiB spellings are accepted too.
var memoryUnits = []struct {
	suffix string
	mult   float64
}{
	{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
	{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1},
}

// ParseMemoryLimit parses a memory_limit value such as "256MB", "1.5GB"
// or 268435456 (bytes); "" is 0, no budget.
func ParseMemoryLimit(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "" {
		return 0, nil
	}
	mult := 1.0
	for _, u := range memoryUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a size (examples: 256MB, 1.5GB, 2GiB)", s)
	}
	n := int64(v * mult)
	if n < MinMemoryLimit {
		return 0, fmt.Errorf("must be at least %dMB; got %q", MinMemoryLimit>>20, s)
	}
	return n, nil
}

// MemoryBudget is memory_limit in bytes, 0 when it is not set. The
// config was validated, so the value parses.
func (c *Config) MemoryBudget() int64 {
	n, _ := ParseMemoryLimit(c.MemoryLimit)
	return n
}

func (c *Config) validateMemory() error {
	if _, err := ParseMemoryLimit(c.MemoryLimit); err != nil {
		return bad("memory_limit", "%s", err.Error())
	}
	return nil
}
