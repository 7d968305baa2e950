package main

import (
	"github.com/tributary-dev/tributary/integration/procstat"

	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	childUser   = "loadgen"
	childSecret = "loadgen-secret-0001"
)

// child is a server started by loadgen on a temporary data directory.
type child struct {
	cmd  *exec.Cmd
	dir  string
	url  string
	done chan error
}

// startChild writes a one-project config without a practical rate limit
// (the measurement is of the server, not of its throttle) and starts bin,
// with its profiler on pprofAddr unless that is empty.
func startChild(bin, memoryLimit, pprofAddr string) (*child, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("server binary: %w (build it with `make build`, or pass -bin)", err)
	}
	dir, err := os.MkdirTemp("", "tributary-loadgen-")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`region: us
log_level: warn
projects:
  - id: 1
    name: Loadgen
    token: loadgen-token-0001
    api_secret: loadgen-api-secret-0001
    service_accounts:
      - {username: %s, secret: %s, role: owner}
    rate_limit: {bytes_per_minute: 1000000GB}
`, childUser, childSecret)
	if memoryLimit != "" {
		cfg = "memory_limit: " + memoryLimit + "\n" + cfg
	}
	cfgPath := filepath.Join(dir, "tributary.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	args := []string{"serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}
	if pprofAddr != "" {
		args = append(args, "--pprof", pprofAddr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, dir: dir, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				ready <- addr
			}
		}
		c.done <- cmd.Wait() // after stdout is drained, as exec requires
	}()
	select {
	case addr := <-ready:
		c.url = "http://" + addr
		return c, nil
	case err := <-c.done:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("server exited before it was ready: %v", err)
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("server not ready after 2 minutes")
	}
}

// stop shuts the server down gracefully and removes its data.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: server exited with %v after SIGTERM\n", err)
		}
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.done
		fmt.Fprintln(os.Stderr, "loadgen: server ignored SIGTERM for a minute; killed")
	}
	os.RemoveAll(c.dir)
}

// status reads a kB field of the server's /proc status (VmRSS, VmHWM).
func (c *child) status(field string) (int64, error) {
	return procstat.KB(c.cmd.Process.Pid, field)
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}
