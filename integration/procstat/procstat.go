// Package procstat reads a process's memory figures from /proc, for tests
// and the load driver that check a server's memory stays bounded.
package procstat

import (
	"fmt"
	"os"
	"strings"
)

// KB returns a kB field of /proc/PID/status, such as VmRSS or VmHWM (peak).
func KB(pid int, field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
