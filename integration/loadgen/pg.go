package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/tributary-dev/tributary/integration/benchkit"
	"github.com/tributary-dev/tributary/integration/procstat"
)

// pgStore is the run's store database, with the CPU figures loadgen reads.
type pgStore struct{ *benchkit.PGStore }

func (p *pgStore) pids(ctx context.Context) (backends, aux []int, err error) {
	rows, err := p.Admin.Query(ctx, `SELECT pid, datname IS NOT DISTINCT FROM $1 FROM pg_stat_activity
		WHERE datname = $1 OR backend_type IN ('walwriter', 'checkpointer', 'background writer')`, p.Name)
	if err != nil {
		return nil, nil, err
	}
	var pid int32
	var isBackend bool
	_, err = pgx.ForEachRow(rows, []any{&pid, &isBackend}, func() error {
		if isBackend {
			backends = append(backends, int(pid))
		} else {
			aux = append(aux, int(pid))
		}
		return nil
	})
	return backends, aux, err
}

// cpuUsage is CPU seconds spent during the measured phase.
type cpuUsage struct {
	server, driver    float64
	pgBackends, pgAux float64
	machine, iowait   float64 // all cores: busy, and idle waiting for I/O
	machine0, iowait0 float64
	start             map[int]float64 // pid → CPU seconds at the start
	srvs              []*child
	pg                *pgStore
}

func startCPU(srvs []*child, pg *pgStore) *cpuUsage {
	u := &cpuUsage{start: map[int]float64{}, srvs: srvs, pg: pg}
	pids := []int{os.Getpid()}
	for _, s := range srvs {
		pids = append(pids, s.Cmd.Process.Pid)
	}
	if pg != nil {
		b, a, err := pg.pids(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: PostgreSQL processes:", err)
		}
		pids = append(append(pids, b...), a...)
	}
	for _, pid := range pids {
		if c, err := procstat.CPUSeconds(pid); err == nil {
			u.start[pid] = c
		}
	}
	u.machine0, u.iowait0, _ = procstat.MachineCPU()
	return u
}

// stop measures what each process used since startCPU; a backend that
// connected meanwhile counts from zero.
func (u *cpuUsage) stop() cpuUsage {
	delta := func(pid int) float64 {
		c, err := procstat.CPUSeconds(pid)
		if err != nil {
			return 0
		}
		return c - u.start[pid]
	}
	out := cpuUsage{driver: delta(os.Getpid())}
	for _, s := range u.srvs {
		out.server += delta(s.Cmd.Process.Pid)
	}
	if u.pg != nil {
		b, a, err := u.pg.pids(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: PostgreSQL processes:", err)
		}
		for _, pid := range b {
			out.pgBackends += delta(pid)
		}
		for _, pid := range a {
			out.pgAux += delta(pid)
		}
	}
	if m, io, err := procstat.MachineCPU(); err == nil && u.machine0 > 0 {
		out.machine, out.iowait = m-u.machine0, io-u.iowait0
	}
	return out
}
