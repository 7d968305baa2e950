package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultMemoryBudget(t *testing.T) {
	const mib, gib = int64(1 << 20), int64(1 << 30)
	for _, tc := range []struct {
		name        string
		avail, want int64
	}{
		{"unknown machine", 0, DefaultMemoryMax},
		{"large host: capped", 64 * gib, DefaultMemoryMax},
		{"the 24 GB bench guest", 24 * gib, DefaultMemoryMax},
		{"4 GB: a quarter", 4 * gib, 1 * gib},
		{"2 GB: a quarter", 2 * gib, 512 * mib},
		{"768 MB: the floor", 768 * mib, DefaultMemoryMin},
		{"400 MB container: half of it", 400 * mib, 200 * mib},
		{"tiny container: memory_limit's minimum", 100 * mib, MinMemoryLimit},
	} {
		if got := DefaultMemoryBudget(tc.avail); got != tc.want {
			t.Errorf("%s: DefaultMemoryBudget(%d MiB) = %d MiB, want %d", tc.name, tc.avail/mib, got/mib, tc.want/mib)
		}
	}
}

func TestMachineMemory(t *testing.T) {
	const meminfo = "MemTotal:       24683620 kB\nMemFree:         1000 kB\n"
	const ram = int64(24683620) << 10
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string
	}{
		{"no cgroup files: RAM", map[string]string{"proc/meminfo": meminfo}, ram, "RAM"},
		{"cgroup v1, unlimited", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup":                           "4:memory:/a/b\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, ram, "RAM"},
		{"cgroup v1, the process's own group", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "4:memory:/a/b\n",
			"sys/fs/cgroup/memory/a/b/memory.limit_in_bytes": "2147483648\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":     "9223372036854771712\n"}, 2 << 30, "cgroup"},
		{"cgroup v1 in a container: the root", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup":                           "9:cpu,memory:/docker/x\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30, "cgroup"},
		{"cgroup v2 limit", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "0::/svc\n", "sys/fs/cgroup/svc/memory.max": "3221225472\n"}, 3 << 30, "cgroup"},
		{"cgroup v2 max", map[string]string{"proc/meminfo": meminfo,
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, ram, "RAM"},
		{"cgroup above RAM: RAM", map[string]string{"proc/meminfo": "MemTotal: 1048576 kB\n",
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "4294967296\n"}, 1 << 30, "RAM"},
		{"nothing readable", nil, 0, "fallback"},
	} {
		root := t.TempDir()
		for name, body := range tc.files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, from := machineMemory(root); got != tc.want || from != tc.from {
			t.Errorf("%s: %d (%s), want %d (%s)", tc.name, got, from, tc.want, tc.from)
		}
	}
}

func TestEffectiveMemoryBudget(t *testing.T) {
	c := &Config{MemoryLimit: "512MB"}
	if n, from := c.EffectiveMemoryBudget(); n != 512<<20 || from != "memory_limit" {
		t.Fatalf("set: %d %s", n, from)
	}
	c.MemoryLimit = ""
	if n, _ := c.EffectiveMemoryBudget(); n < MinMemoryLimit || n > DefaultMemoryMax {
		t.Fatalf("unset: %d outside [%d, %d]", n, MinMemoryLimit, DefaultMemoryMax)
	}
}
