package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/integration/benchkit"
	"github.com/tributary-dev/tributary/integration/procstat"
)

// Server processes, the store database and CPU sampling for the -store mode.

// server is one `tributary serve` child on a temporary data directory.
type server struct{ *benchkit.Server }

func startServer(bin, importsDir, storeURL, srcDSN, storeYAML string) (*server, error) {
	dir, err := os.MkdirTemp("", "tributary-syncbench-serve-")
	if err != nil {
		return nil, err
	}
	cfg := serverConfig(importsDir, srvUser, srvSecret, storeYAML)
	if storeURL != "" {
		cfg = "store: " + strconv.Quote(storeURL) + "\n" + cfg
	}
	srv, err := benchkit.StartServer("syncbench", bin, dir, cfg, []string{dsnEnv + "=" + srcDSN}, nil)
	if err != nil {
		return nil, err
	}
	return &server{srv}, nil
}

func (s *server) do(c *http.Client, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(srvUser, srvSecret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, err
}

func importURL(id string) string {
	return "/api/app/projects/1/warehouse-sources/imports/" + id
}

func (s *server) trigger(c *http.Client, imp string) (string, error) {
	b, err := s.do(c, http.MethodPut, importURL(imp)+"/manual-sync", []byte(`{}`))
	if err != nil {
		return "", err
	}
	var body struct {
		Results struct {
			RunID string `json:"run_id"`
		}
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Results.RunID == "" {
		return "", fmt.Errorf("manual sync of %s: %s", imp, b)
	}
	return body.Results.RunID, nil
}

type runRow struct {
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	Imported   int64  `json:"num_events_imported"`
	RowsRead   int64  `json:"num_rows_read"`
	Failed     int64  `json:"num_rows_failed"`
	Duplicates int64  `json:"num_duplicates"`
	Reason     string `json:"reason"`
}

func (s *server) run(c *http.Client, imp, id string) (runRow, bool, error) {
	b, err := s.do(c, http.MethodGet, importURL(imp)+"/history?limit=10", nil)
	if err != nil {
		return runRow{}, false, err
	}
	var body struct {
		Results struct{ Runs []runRow }
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return runRow{}, false, err
	}
	for _, r := range body.Results.Runs {
		if r.RunID == id {
			return r, true, nil
		}
	}
	return runRow{}, false, nil
}

// waitLoaded answers once every acknowledged write is visible to scans:
// an export of an empty day waits for the store's Sync.
func (s *server) waitLoaded(c *http.Client) error {
	_, err := s.do(c, http.MethodGet, "/api/2.0/export?from_date=2001-01-01&to_date=2001-01-01&project_id=1", nil)
	return err
}

// cpuSampler follows the CPU of the servers and of PostgreSQL's processes
// (backends of the store and of the source database, and the WAL writer,
// checkpointer and background writer) while the syncs run. It samples
// repeatedly, because source backends come and go with the runs.
type cpuSampler struct {
	admin      *pgx.Conn
	store, src string
	base, last map[int]float64
	kind       map[int]string // pid → "server", "store", "source", "aux"
	machine0   float64
}

func newCPUSampler(admin *pgx.Conn, srvs []*server, store, src string) *cpuSampler {
	s := &cpuSampler{admin: admin, store: store, src: src, base: map[int]float64{}, last: map[int]float64{}, kind: map[int]string{}}
	for _, sv := range srvs {
		s.kind[sv.Cmd.Process.Pid] = "server"
	}
	s.sample(true)
	s.machine0, _, _ = procstat.MachineCPU()
	return s
}

func (s *cpuSampler) sample(first bool) {
	rows, err := s.admin.Query(context.Background(), `SELECT pid, CASE WHEN datname = $1 THEN 'store'
		WHEN datname = $2 THEN 'source' ELSE 'aux' END FROM pg_stat_activity
		WHERE datname IN ($1, $2) OR backend_type IN ('walwriter', 'checkpointer', 'background writer')`, s.store, s.src)
	if err == nil {
		var pid int32
		var kind string
		_, _ = pgx.ForEachRow(rows, []any{&pid, &kind}, func() error {
			if _, ok := s.kind[int(pid)]; !ok {
				s.kind[int(pid)] = kind
			}
			return nil
		})
	}
	for pid := range s.kind {
		c, err := procstat.CPUSeconds(pid)
		if err != nil {
			continue
		}
		if _, ok := s.base[pid]; !ok {
			if first {
				s.base[pid] = c
			} else {
				s.base[pid] = 0 // started during the measurement
			}
		}
		s.last[pid] = c
	}
}

// totals returns CPU seconds by kind, and the machine's busy seconds.
func (s *cpuSampler) totals() (map[string]float64, float64) {
	s.sample(false)
	out := map[string]float64{}
	for pid, k := range s.kind {
		out[k] += s.last[pid] - s.base[pid]
	}
	m, _, _ := procstat.MachineCPU()
	return out, m - s.machine0
}
