package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// dsnEnv carries the source DSN to the child: import files may hold a
// secret only as ${VAR}, and this also keeps it out of the command line.
const dsnEnv = "SYNCBENCH_PG_DSN"

// writeFiles writes the server config (one Simplified ID Merge project,
// the shape of configs/tributary.yaml) and the import into dir.
func writeFiles(dir, storeYAML string) (cfgPath, importPath string, err error) {
	cfg := "data_dir: " + strconv.Quote(filepath.Join(dir, "data")) + "\n" +
		serverConfig(filepath.Join(dir, "imports"), "syncbench", "syncbench-secret-0001", storeYAML)
	imp := importDoc("syncbench-events", "events")
	cfgPath = filepath.Join(dir, "tributary.yaml")
	importPath = filepath.Join(dir, "syncbench-events.yaml")
	if err := os.MkdirAll(filepath.Join(dir, "imports"), 0o700); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return "", "", err
	}
	return cfgPath, importPath, os.WriteFile(importPath, []byte(imp), 0o600)
}

// syncResult is one `tributary sync` as the driver saw it.
type syncResult struct {
	// wall is process start to exit, the rate's denominator: it includes
	// opening the store and the close that waits for the background
	// loader, because only then are the rows in the tables.
	wall            time.Duration
	runDur          time.Duration // the run's own start to end, from its summary
	read, imported  int64
	duplicates      int64
	failed          int64
	status, summary string
	peakRSSKiB      int64
	cpu             time.Duration // user + system
	storeBytes      int64
}

// The summary line cmd/tributary/sync.go prints on stdout.
var summaryRE = regexp.MustCompile(`^run (\S+) (\S+): (\d+) rows read, (\d+) imported, (\d+) duplicates, (\d+) failed, .* in (\S+) \(`)

// runSync runs bin's sync of the import on a fresh data directory and
// returns its figures. An error means the measurement is void: the child
// failed or its summary is missing.
func runSync(bin, cfgPath, importPath, dsn, dataDir string) (*syncResult, error) {
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "sync", "-c", importPath, "--config", cfgPath, "--data-dir", dataDir, "--quiet")
	cmd.Env = append(os.Environ(), dsnEnv+"="+dsn)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stdout)
	cmd.Stderr = os.Stderr
	// The child dies with the driver, so an interrupted benchmark leaves
	// no sync holding the database that cleanup drops.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	runErr := cmd.Run()
	r := &syncResult{wall: time.Since(start)}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.peakRSSKiB = ru.Maxrss // KiB on Linux
		}
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if runErr != nil {
		return r, fmt.Errorf("%s sync: %w", bin, runErr)
	}
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		m := summaryRE.FindSubmatch(line)
		if m == nil {
			continue
		}
		r.summary, r.status = string(line), string(m[2])
		nums := []*int64{&r.read, &r.imported, &r.duplicates, &r.failed}
		for i, p := range nums {
			*p, _ = strconv.ParseInt(string(m[3+i]), 10, 64)
		}
		r.runDur, _ = time.ParseDuration(string(m[7]))
	}
	if r.summary == "" {
		return r, fmt.Errorf("%s sync exited 0 without a summary line on stdout", bin)
	}
	r.storeBytes, _ = dirSize(dataDir)
	return r, nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return err
	})
	return n, err
}

// serverConfig is the config every syncbench server runs (one Simplified
// ID Merge project, the shape of configs/tributary.yaml), less data_dir.
// storeYAML holds top-level store settings (memory_limit).
func serverConfig(importsDir, user, secret, storeYAML string) string {
	cfg := fmt.Sprintf(`imports_dir: %s
region: us
log_level: warn
projects:
  - id: 1
    name: Syncbench
    token: syncbench-token-0001
    api_secret: syncbench-api-secret-0001
    region: us
    id_management: simplified
    service_accounts:
      - {username: %s, secret: %s, role: owner}
`, strconv.Quote(importsDir), user, secret)
	return storeYAML + cfg
}

// importDoc is a time_based import of public.table, the path a scheduled
// import takes: ORDER BY loaded_at, id with the watermark committed batch
// by batch; on a fresh data directory it reads the whole table.
func importDoc(id, table string) string {
	return fmt.Sprintf(`id: %s
project_id: 1
import_type: event_stream
sync_mode: time_based
source: {kind: postgres, dsn: "${%s}"}
table_params: {table: public.%s}
event_column_name: event_type
time_column_name: event_time
user_column_name: user_id
device_column_name: device_id
insert_id_column_name: id
insert_time_column_name: loaded_at
json_properties_column_name: props
schedule: api
`, id, dsnEnv, table)
}
