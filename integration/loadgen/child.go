package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tributary-dev/tributary/integration/benchkit"
	"github.com/tributary-dev/tributary/integration/procstat"
)

const (
	childUser   = "loadgen"
	childSecret = "loadgen-secret-0001"
)

// child is a server started by loadgen on a temporary data directory.
type child struct{ *benchkit.Server }

// startChild writes a one-project config without a practical rate limit
// (the measurement is of the server, not of its throttle) and starts bin,
// with its profiler on pprofAddr unless that is empty, on the store at
// storeURL (empty: the embedded store in its data directory).
func startChild(bin, memoryLimit, pprofAddr, storeURL, logLevel string) (*child, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("server binary: %w (build it with `make build`, or pass -bin)", err)
	}
	dir, err := os.MkdirTemp("", "tributary-loadgen-")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`region: us
log_level: %s
projects:
  - id: 1
    name: Loadgen
    token: loadgen-token-0001
    api_secret: loadgen-api-secret-0001
    service_accounts:
      - {username: %s, secret: %s, role: owner}
    rate_limit: {bytes_per_minute: 1000000GB}
`, logLevel, childUser, childSecret)
	if memoryLimit != "" {
		cfg = "memory_limit: " + memoryLimit + "\n" + cfg
	}
	if storeURL != "" {
		cfg = "store: " + strconv.Quote(storeURL) + "\n" + cfg
	}
	// An empty imports directory: the default one is relative to the
	// working directory, and its demo imports would run beside the load.
	imports := filepath.Join(dir, "imports")
	if err := os.Mkdir(imports, 0o700); err != nil {
		return nil, err
	}
	cfg = "imports_dir: " + strconv.Quote(imports) + "\n" + cfg
	var args []string
	if pprofAddr != "" {
		args = append(args, "--pprof", pprofAddr)
	}
	srv, err := benchkit.StartServer("loadgen", bin, dir, cfg, nil, args)
	if err != nil {
		return nil, err
	}
	return &child{srv}, nil
}

// status reads a kB field of the server's /proc status (VmRSS, VmHWM).
func (c *child) status(field string) (int64, error) {
	return procstat.KB(c.Cmd.Process.Pid, field)
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
