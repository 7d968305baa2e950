package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tributary-dev/tributary/integration/benchkit"
	"github.com/tributary-dev/tributary/integration/procstat"
)

// The -store mode: `tributary serve` processes on one store, K imports of
// K source tables triggered through the manual-sync API and spread over
// the processes, timed from the first trigger until every run finished
// and an export saw every row. The embedded store (1 process), Postgres
// with 1 process and Postgres with -procs processes sync the same tables,
// each on a fresh store.

const (
	srvUser   = "syncbench"
	srvSecret = "syncbench-secret-0001"
	// Target from issue 8: N processes reach ≥ 0.9 × one process's total.
	minProcsRatio = 0.9
)

func partTable(i int) string  { return fmt.Sprintf("part_%d", i) }
func partImport(i int) string { return fmt.Sprintf("syncbench-part-%d", i) }

// fillParts creates k tables shaped like events and splits rows 1..n
// over them, so the k imports together read n rows.
func (db *benchDB) fillParts(ctx context.Context, k int, n int64) error {
	start := time.Now()
	now := time.Now().UTC().Add(-time.Hour)
	loadBase := now.Add(-24 * time.Hour)
	for i := 1; i <= k; i++ {
		t := partTable(i)
		if _, err := db.conn.Exec(ctx, "CREATE TABLE "+t+" (LIKE events INCLUDING ALL)"); err != nil {
			return fmt.Errorf("create %s: %w", t, err)
		}
		from, to := n*int64(i-1)/int64(k)+1, n*int64(i)/int64(k)
		if _, err := db.conn.Exec(ctx, strings.Replace(insertSQL, "INSERT INTO events", "INSERT INTO "+t, 1), from, to, now, loadBase); err != nil {
			return fmt.Errorf("fill %s: %w", t, err)
		}
		if _, err := db.conn.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
		fmt.Printf("  %s: rows %d..%d (%s)\n", t, from, to, time.Since(start).Round(time.Second))
	}
	db.rows = n
	return nil
}

// partsCopyRate is the yardstick: the best of two passes of COPY of every
// part in turn, in rows/s.
func (db *benchDB) partsCopyRate(ctx context.Context, k int) (float64, error) {
	best := 0.0
	for range 2 {
		start := time.Now()
		var rows int64
		for i := 1; i <= k; i++ {
			tag, err := db.conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT * FROM "+partTable(i)+") TO STDOUT")
			if err != nil {
				return 0, fmt.Errorf("copy: %w", err)
			}
			rows += tag.RowsAffected()
		}
		if rows != db.rows {
			return 0, fmt.Errorf("copy: %d rows, the parts hold %d", rows, db.rows)
		}
		best = max(best, float64(rows)/time.Since(start).Seconds())
	}
	return best, nil
}

// writeServeImports writes k api-scheduled time_based imports, one per part.
func writeServeImports(dir string, k int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i := 1; i <= k; i++ {
		imp := importDoc(partImport(i), partTable(i))
		if err := os.WriteFile(filepath.Join(dir, partImport(i)+".yaml"), []byte(imp), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// serveResult is one configuration's figures.
type serveResult struct {
	name      string
	procs     int
	wall      time.Duration
	rows      int64
	cpu       map[string]float64
	machine   float64
	peakRSS   []int64 // MiB per server
	perServer []int   // runs triggered on each server
}

func (r serveResult) rate() float64 { return float64(r.rows) / r.wall.Seconds() }

// runServe syncs the k parts on procs servers on one store (storeAdmin
// empty: the embedded store, one process).
func runServe(ctx context.Context, o options, bin string, db *benchDB, storeAdmin string, procs int) (*serveResult, error) {
	name := "embedded"
	storeURL, storeDB := "", ""
	if storeAdmin != "" {
		pg, err := benchkit.CreatePGStore(ctx, storeAdmin, "tributary_syncbench_store_")
		if err != nil {
			return nil, err
		}
		defer pg.Drop() // after the servers stopped
		storeURL, storeDB, name = pg.URL, pg.Name, "postgres"
	}
	fmt.Printf("%s store, %d process(es): syncing %d imports of %d rows in all...\n", name, procs, o.imports, db.rows)
	dir, err := os.MkdirTemp("", "tributary-syncbench-imports-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := writeServeImports(dir, o.imports); err != nil {
		return nil, err
	}
	var srvs []*server
	for range procs {
		s, err := startServer(bin, dir, storeURL, db.dsn, o.storeYAML())
		if err != nil {
			return nil, err
		}
		defer s.Stop()
		srvs = append(srvs, s)
	}
	c := &http.Client{Timeout: 10 * time.Minute}
	cpu := newCPUSampler(db.admin, srvs, storeDB, db.name)
	res := &serveResult{name: name, procs: procs, perServer: make([]int, procs)}
	start := time.Now()
	type pending struct {
		srv     *server
		imp, id string
	}
	var runs []pending
	for i := 1; i <= o.imports; i++ {
		k := (i - 1) % procs
		id, err := srvs[k].trigger(c, partImport(i))
		if err != nil {
			return nil, err
		}
		res.perServer[k]++
		runs = append(runs, pending{srvs[k], partImport(i), id})
	}
	deadline := start.Add(30 * time.Minute)
	var errs []string
	for len(runs) > 0 {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d runs unfinished after 30 minutes", len(runs))
		}
		time.Sleep(100 * time.Millisecond)
		cpu.sample(false)
		left := runs[:0]
		for _, p := range runs {
			r, ok, err := p.srv.run(c, p.imp, p.id)
			if err != nil {
				return nil, err
			}
			if !ok || r.Status == "RUNNING" {
				left = append(left, p)
				continue
			}
			if r.Status != "SUCCEEDED" || r.Duplicates != 0 || r.Failed != 0 {
				errs = append(errs, fmt.Sprintf("%s: %s %s, %d read, %d imported, %d duplicates, %d failed", p.imp, r.Status, r.Reason, r.RowsRead, r.Imported, r.Duplicates, r.Failed))
			}
			res.rows += r.Imported
		}
		runs = left
	}
	for _, s := range srvs {
		if err := s.waitLoaded(c); err != nil {
			return nil, err
		}
	}
	res.wall = time.Since(start)
	res.cpu, res.machine = cpu.totals()
	for _, s := range srvs {
		kb, _ := procstat.KB(s.Cmd.Process.Pid, "VmHWM")
		res.peakRSS = append(res.peakRSS, kb>>10)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s store, %d process(es): %s", name, procs, strings.Join(errs, "; "))
	}
	if res.rows != db.rows {
		return nil, fmt.Errorf("%s store, %d process(es): %d rows imported, the source holds %d", name, procs, res.rows, db.rows)
	}
	fmt.Printf("  %d rows in %s: %.0f rows/s\n", res.rows, res.wall.Round(10*time.Millisecond), res.rate())
	return res, nil
}

// runStoreMode is main's run with -store: fill the parts, then the three
// configurations, then the report.
func runStoreMode(ctx context.Context, o options, bin string, db *benchDB) error {
	n := o.sizes[len(o.sizes)-1]
	fmt.Printf("filling %d tables with %d rows in all...\n", o.imports, n)
	if err := db.fillParts(ctx, o.imports, n); err != nil {
		return err
	}
	copyRate, err := db.partsCopyRate(ctx, o.imports)
	if err != nil {
		return err
	}
	fmt.Printf("  COPY TO STDOUT: %.0f rows/s (best of 2, the %d tables in turn)\n", copyRate, o.imports)
	var rs []*serveResult
	for _, cfg := range []struct {
		store string
		procs int
	}{{"", 1}, {o.store, 1}, {o.store, o.procs}} {
		if cfg.store != "" && cfg.procs == 1 && len(rs) == 2 {
			break // -procs 1: the Postgres run is already done
		}
		r, err := runServe(ctx, o, bin, db, cfg.store, cfg.procs)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	fmt.Println()
	fmt.Printf("end-to-end sync through `tributary serve`, %d time_based imports of %d rows in all (12 columns), manual-sync API, %d cores; COPY TO STDOUT %.0f rows/s\n",
		o.imports, n, runtime.NumCPU(), copyRate)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "store\tprocs\truns/proc\trows/s\tsync/COPY\twall\tserver CPU\tPG store CPU\tPG source CPU\tPG aux CPU\tmachine busy\tpeak RSS MiB\tsaturates\t")
	for _, r := range rs {
		secs := r.wall.Seconds()
		per := make([]string, len(r.perServer))
		rss := make([]string, len(r.peakRSS))
		for i := range per {
			per[i] = strconv.Itoa(r.perServer[i])
			rss[i] = strconv.FormatInt(r.peakRSS[i], 10)
		}
		pg := r.cpu["store"] + r.cpu["source"] + r.cpu["aux"]
		sat := "server"
		if pg > r.cpu["server"] {
			sat = "postgres"
		}
		if r.machine/secs < 0.8*float64(runtime.NumCPU()) {
			sat += " (machine not saturated)"
		} else {
			sat += " (machine saturated)"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%.0f\t%.2f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", r.name, r.procs, strings.Join(per, "/"),
			r.rate(), r.rate()/copyRate, r.wall.Round(10*time.Millisecond), r.cpu["server"]/secs, r.cpu["store"]/secs,
			r.cpu["source"]/secs, r.cpu["aux"]/secs, r.machine/secs, strings.Join(rss, "/"), sat)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Println("(CPU columns in cores: average over the wall time)")
	if len(rs) == 3 {
		ratio := rs[2].rate() / rs[1].rate()
		fmt.Printf("postgres %d procs ÷ 1 proc: %.2f; postgres 1 proc ÷ embedded: %.2f\n", rs[2].procs, ratio, rs[1].rate()/rs[0].rate())
		t := fmt.Sprintf("target: %d processes ≥ %.1f × one process", rs[2].procs, minProcsRatio)
		if ratio >= minProcsRatio {
			fmt.Printf("TARGET MET (%s)\n", t)
		} else {
			fmt.Printf("TARGET MISSED (%s): %.2f\n", t, ratio)
		}
	} else {
		fmt.Printf("postgres 1 proc ÷ embedded: %.2f\n", rs[1].rate()/rs[0].rate())
	}
	return nil
}
