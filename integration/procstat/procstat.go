// Package procstat reads process and machine figures from /proc (memory,
// CPU time), for tests and the benchmark drivers.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SelfCPU is the user+system CPU time this process has used (0 if the
// system will not say): benchmarks report it per item, the steadier
// figure on a shared machine, where other processes stretch only the
// wall clock.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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

// CPUSeconds is the user+system CPU time a process has used so far, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func CPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields resume after ')'.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return (ut + st) / 100, nil
}

// MachineCPU reads the busy and I/O-wait seconds of all cores from
// /proc/stat's first line.
func MachineCPU() (busy, iowait float64, err error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat")
	}
	var v [8]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i+1], 64); err != nil {
			return 0, 0, err
		}
	}
	busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return busy / 100, v[4] / 100, nil
}
