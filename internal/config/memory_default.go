package config

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Without memory_limit the server still needs a budget: DuckDB's own
// default is 80 % of RAM for its cache, which it fills as the store grows
// (1.3 GiB of RSS at 20 M events), and the Go heap would have no soft
// limit. So an unset memory_limit means a quarter of the memory the
// process may use (its cgroup's limit, else the machine's RAM), within
// DefaultMemoryMin and DefaultMemoryMax. The cap is what the embedded store
// was measured to need at 100 M stored events while importing at full
// rate; more only buys DuckDB cache for queries, which a user asks for by
// setting memory_limit.
const (
	DefaultMemoryMin = 256 << 20
	DefaultMemoryMax = 1 << 30
)

// DefaultMemoryBudget is the budget of a process allowed avail bytes
// (0: unknown) when memory_limit is unset.
func DefaultMemoryBudget(avail int64) int64 {
	if avail <= 0 {
		return DefaultMemoryMax
	}
	n := min(max(avail/4, DefaultMemoryMin), DefaultMemoryMax)
	// A small container: at most half of it, the rest is the executable,
	// page cache and whatever else runs there.
	return max(min(n, avail/2), MinMemoryLimit)
}

// EffectiveMemoryBudget is memory_limit in bytes, or when it is unset the
// default for this machine; from says which ("memory_limit", "cgroup",
// "RAM" or "fallback").
func (c *Config) EffectiveMemoryBudget() (n int64, from string) {
	if n := c.MemoryBudget(); n > 0 {
		return n, "memory_limit"
	}
	avail, from := machineMemory("/")
	return DefaultMemoryBudget(avail), from
}

// machineMemory is the memory this process may use: the smaller of its
// cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) and the
// machine's RAM; root prefixes /proc and /sys (tests use a fake tree).
func machineMemory(root string) (int64, string) {
	ram := memTotal(filepath.Join(root, "proc/meminfo"))
	cg := cgroupLimit(root)
	switch {
	case cg > 0 && (ram <= 0 || cg < ram):
		return cg, "cgroup"
	case ram > 0:
		return ram, "RAM"
	}
	return 0, "fallback"
}

// memTotal reads MemTotal from a /proc/meminfo, 0 if it cannot.
func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// cgroupLimit is the memory limit of the process's cgroup, 0 for none.
// The cgroup's own directory is tried first (a host's view), then the
// hierarchy's root (a container mounts its own cgroup there).
func cgroupLimit(root string) int64 {
	var v1, v2 string
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case strings.Contains(","+parts[1]+",", ",memory,"):
				v1 = parts[2]
			}
		}
	}
	cands := []string{
		filepath.Join(root, "sys/fs/cgroup", v2, "memory.max"),
		filepath.Join(root, "sys/fs/cgroup/memory.max"),
		filepath.Join(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"),
		filepath.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"),
	}
	for _, p := range cands {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 writes "no limit" as a huge page-aligned number.
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}
