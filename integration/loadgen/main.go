// Command loadgen measures Tributary's end-to-end ingestion rate.
//
//	go run ./integration/loadgen -bin bin/tributary [-preload 10000000] [-duration 30s] [-conns 16]
//	go run ./integration/loadgen -bin bin/tributary -store postgres://postgres@127.0.0.1/test -procs 3
//	go run ./integration/loadgen -bin bin/tributary -store postgres://… -preload 50000000 -span 17520h -live 6h -baseline
//	go run ./integration/loadgen -addr 127.0.0.1:8080 -user SA -secret S -project 1
//	go run ./integration/loadgen -bin bin/tributary -cpuprofile cpu.pprof   # server profile of the measured phase
//
// It starts its own server on a temporary data directory (or targets a
// running one with -addr), preloads events through /import so the store is
// not empty, then posts pre-generated, pre-compressed 2000-event batches
// from -conns connections for -duration and reports the rate of events
// acknowledged with 200 (durable by contract), latencies and errors. It then
// measures how fast one core merely decodes the same bytes with
// encoding/json, as a yardstick for the server's per-event cost.
//
// With -store, the servers use the Postgres store in a database that
// loadgen creates for the run (and drops after) on that server, and
// -procs N starts N of them, the connections spread evenly over them. The
// CPU that PostgreSQL spent on the run (its backends for that database,
// and the WAL writer, checkpointer and background writer) is reported
// beside the servers', so the figures show which side saturates.
//
// Event times: by default every event is at a random time in the last
// 6 hours (-span). With -live, the preload is history in time order over
// -span and the measured events are live traffic, at random times in the
// last -live; without it, -span 17520h is a backfill of 2 years at random.
// -baseline measures the empty store first, so one run gives the ratio.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/tributary-dev/tributary/integration/benchkit"
	"net/http"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

type options struct {
	bin, addr, user, secret string
	project                 int64
	preload                 int
	duration                time.Duration
	conns, batch            int
	maxPayloadMB            int
	memoryLimit             string
	cpuProfile              string
	store                   string
	procs                   int
	span, live              time.Duration
	baseline                bool
	dup                     float64
	restart                 string
	logLevel                string
	keep                    bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/tributary", "server binary to start (ignored with -addr)")
	flag.StringVar(&o.addr, "addr", "", "host:port of a running server instead of starting one")
	flag.StringVar(&o.user, "user", "", "service account user (with -addr; empty: -secret is the API secret)")
	flag.StringVar(&o.secret, "secret", "", "service account secret or API secret (with -addr)")
	flag.Int64Var(&o.project, "project", 1, "project id (with -addr)")
	flag.IntVar(&o.preload, "preload", 10_000_000, "events to import before measuring")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "length of the measured phase")
	flag.IntVar(&o.conns, "conns", 16, "concurrent connections")
	flag.IntVar(&o.batch, "batch", 2000, "events per request")
	flag.IntVar(&o.maxPayloadMB, "max-payload-mb", 2048, "cap on pre-generated compressed payload memory")
	flag.StringVar(&o.memoryLimit, "memory-limit", "", "memory_limit of the started server (empty: its default)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the (first) started server's measured phase to this file")
	flag.StringVar(&o.store, "store", "", "postgres:// URL of a database on the server to create the run's database from (empty: the embedded store)")
	flag.IntVar(&o.procs, "procs", 1, "servers to start on the one store (more than 1 needs -store)")
	flag.DurationVar(&o.span, "span", 6*time.Hour, "event times spread over this long before now (2 years: 17520h)")
	flag.DurationVar(&o.live, "live", 0, "if set, the preload is history in time order over -span before this last stretch, and the measured events fall at random in it (live traffic); unset, every event is at a random time in -span (a backfill)")
	flag.BoolVar(&o.baseline, "baseline", false, "measure on the empty store too, before the preload, and report the ratio (one run, one time window)")
	flag.Float64Var(&o.dup, "dup", 0, "share of events (0 to 1) that re-send an earlier event unchanged (exact duplicates)")
	flag.StringVar(&o.restart, "restart", "", "after the preload, stop the server and time its restart to listening (one started server); term: SIGTERM once loaded; kill: SIGKILL while posting, then a clean restart after the measured phase and a check that every acknowledged event is stored once")
	flag.StringVar(&o.logLevel, "log-level", "warn", "log_level of the started servers (their log goes to stderr)")
	flag.BoolVar(&o.keep, "keep", false, "leave the started server's data directory in place (it is printed; remove it yourself) for experiments on the stored events")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	switch {
	case o.procs < 1:
		return errors.New("-procs must be at least 1")
	case o.procs > 1 && o.store == "":
		return errors.New("-procs above 1 needs -store: the embedded store serves one process")
	case o.addr != "" && (o.store != "" || o.procs > 1):
		return errors.New("-addr targets a running server: -store and -procs start servers")
	case o.live < 0 || o.live > o.span:
		return errors.New("-live must be within -span")
	case o.restart != "" && (o.addr != "" || o.procs > 1):
		return errors.New("-restart needs the one server loadgen starts")
	case o.restart != "" && o.restart != "term" && o.restart != "kill":
		return errors.New("-restart must be term or kill")
	case o.dup < 0 || o.dup > 1:
		return errors.New("-dup must be between 0 and 1")
	}
	tgts := []target{{base: "http://" + o.addr, project: o.project, user: o.user, secret: o.secret}}
	var srvs []*child
	var pg *pgStore
	pprofAddr := ""
	if o.addr == "" {
		var err error
		if o.cpuProfile != "" {
			if pprofAddr, err = freeLoopback(); err != nil {
				return err
			}
		}
		storeURL := ""
		if o.store != "" {
			ps, err := benchkit.CreatePGStore(context.Background(), o.store, "tributary_loadgen_")
			if err != nil {
				return err
			}
			pg = &pgStore{ps}
			defer pg.Drop() // deferred first: runs after the servers stopped
			storeURL = pg.URL
			fmt.Printf("store: PostgreSQL database %s, %d server process(es)\n", pg.Name, o.procs)
		}
		tgts = tgts[:0]
		for i := range o.procs {
			prof := pprofAddr
			if i > 0 {
				prof = ""
			}
			srv, err := startChild(o.bin, o.memoryLimit, prof, storeURL, o.logLevel)
			if err != nil {
				return err
			}
			if o.keep {
				defer srv.Halt()
				defer fmt.Printf("kept %s\n", srv.Dir)
			} else {
				defer srv.Stop()
			}
			srvs = append(srvs, srv)
			tgts = append(tgts, target{base: srv.URL, project: 1, user: childUser, secret: childSecret})
			fmt.Printf("started %s (pid %d) at %s, data in %s\n", o.bin, srv.Cmd.Process.Pid, srv.URL, srv.Dir)
			if prof != "" {
				fmt.Printf("  its profiler: http://%s/debug/pprof/\n", prof)
			}
		}
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		MaxIdleConnsPerHost: o.conns, DisableCompression: true}}
	gen := newGenerator(time.Now(), o.span, o.live, o.preload, o.dup)

	// The empty store's rate, measured as the stored one is below. Its
	// events are measured events under insert ids of their own; with
	// -live, in the stretch before the live window (where the history
	// holds only a few), so that the measured phase starts on an empty
	// live window too.
	var empty *result
	var emptyCPU cpuUsage
	if o.baseline {
		bgen := newGenerator(time.Now(), o.span, o.live, 0, o.dup)
		bgen.run += "e"
		bgen.base -= bgen.liveMs
		payloads, _, _ := pregenerate(bgen, max(100_000*int(o.duration.Seconds())*3/o.batch+o.conns, 4*o.conns), o)
		fmt.Printf("empty store: ")
		cpu := startCPU(srvs, pg)
		empty = measure(client, tgts, payloads, o)
		emptyCPU = cpu.stop()
		fmt.Printf("  %.0f events/s, p99 %s\n", float64(empty.events)/empty.elapsed.Seconds(), empty.p(0.99))
	}

	// With -restart kill, the events every 200 answered are tracked
	// (crash.go): the preload's and those of the crash window after it.
	var acked, unacked *bitset
	if o.restart == "kill" {
		acked, unacked = newBitset(int64(o.preload)+crashSeqs), newBitset(int64(o.preload)+crashSeqs)
	}
	// Preload: generated on the fly (the server's rate here is context, not the headline).
	preRate, err := preload(client, tgts, gen, o, acked)
	if err != nil {
		return err
	}
	var restartTook time.Duration
	var preloadPeakKB int64
	var crash crashRun
	switch o.restart {
	case "term":
		if _, err := waitLoaded(client, tgts[0]); err != nil {
			return fmt.Errorf("before restart: %w", err)
		}
		preloadPeakKB, _ = srvs[0].status("VmHWM")
		if restartTook, err = srvs[0].Restart(false); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
	case "kill":
		fmt.Printf("posting for %s more, then SIGKILL mid-import...\n", crashWindow)
		if crash, err = crashImport(client, tgts[0], srvs[0], gen, o, acked, unacked); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		restartTook, preloadPeakKB = crash.restart, crash.peakKB
	}
	if o.restart != "" {
		tgts[0].base = srvs[0].URL
		fmt.Printf("restarted in %s (SIG%s, then start until listening)\n", restartTook.Round(time.Millisecond), strings.ToUpper(o.restart))
	}

	// Pre-generate every measured payload so the measured phase spends no
	// CPU on generation. The preload rate understates the measured one (the
	// preload generates as it goes), so size the pool for 3× it, within the cap.
	need := int(preRate*o.duration.Seconds()*3)/o.batch + o.conns
	need = max(need, 4*o.conns)
	genStart := time.Now()
	fmt.Printf("generating up to %d pre-compressed batches of %d events...\n", need, o.batch)
	payloads, raw, rawBytes := pregenerate(gen, need, o)
	wireBytes := 0
	for _, p := range payloads {
		wireBytes += len(p)
	}
	fmt.Printf("  %d batches in %s, %.1f MB compressed (%.1f MB raw, %.0f bytes/event)\n", len(payloads),
		time.Since(genStart).Round(time.Millisecond), float64(wireBytes)/1e6, float64(rawBytes)/1e6,
		float64(rawBytes)/float64(len(payloads)*o.batch))

	var profDone <-chan error
	if pprofAddr != "" {
		profDone = captureProfile(pprofAddr, o.cpuProfile, max(int(o.duration.Seconds())-1, 1))
	}
	cpu := startCPU(srvs, pg)
	m := measure(client, tgts, payloads, o)
	usage := cpu.stop()
	// Acknowledged is durable in the log; how long until it is all in the
	// tables shows whether the server's background loader kept up.
	catchUp, catchErr := waitLoaded(client, tgts[0])
	if profDone != nil {
		if err := <-profDone; err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		} else {
			fmt.Printf("server CPU profile of the measured phase: %s\n", o.cpuProfile)
		}
	}
	decodeRate := decodeOnly(raw, o.batch)
	var check *crashCheck
	var cleanTook time.Duration
	var measuredPeakKB int64
	if o.restart == "kill" {
		if check, cleanTook, measuredPeakKB, err = afterCrash(client, &tgts[0], srvs[0], gen, acked, unacked); err != nil {
			return err
		}
	}

	ours := float64(m.events) / m.elapsed.Seconds()
	secs := m.elapsed.Seconds()
	perEvent := func(cpuSecs float64) float64 { return 1e6 * cpuSecs / float64(max(m.events, 1)) }
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "measured phase\t%s, %d connections, %d events/request, gzip, strict=1\n", m.elapsed.Round(time.Millisecond), o.conns, o.batch)
	if pg != nil {
		fmt.Fprintf(w, "store\tPostgreSQL (%s), %d server process(es)\n", pg.Name, len(srvs))
	} else if srvs != nil {
		fmt.Fprintf(w, "store\tembedded, 1 server process\n")
	}
	fmt.Fprintf(w, "preload rate\t%.0f events/s (uncompressed, generated on the fly)\n", preRate)
	fmt.Fprintf(w, "accepted + durable (200)\t%.0f events/s (%d events)\n", ours, m.events)
	fmt.Fprintf(w, "requests\t%.1f req/s (%d ok, %d failed)\n", float64(m.requests)/secs, m.ok, m.requests-m.ok)
	fmt.Fprintf(w, "latency\tp50 %s  p99 %s  max %s\n", m.p(0.50), m.p(0.99), m.p(1))
	fmt.Fprintf(w, "thousand events acked per second\t%s\n", m.perSec)
	if empty != nil {
		er := float64(empty.events) / empty.elapsed.Seconds()
		fmt.Fprintf(w, "empty store, before the preload\t%.0f events/s, p50 %s  p99 %s, errors: %s\n", er, empty.p(0.50), empty.p(0.99), empty.errorText())
		fmt.Fprintf(w, "with %d stored ÷ empty\t%.2f\n", o.preload, ours/er)
		if emptyCPU.server > 0 && usage.server > 0 {
			// The machine's load may change between the two phases; the
			// server's CPU per event does not depend on it.
			ecpu := 1e6 * emptyCPU.server / float64(max(empty.events, 1))
			fmt.Fprintf(w, "server CPU per event: empty ÷ with %d stored\t%.1f µs ÷ %.1f µs = %.2f\n", o.preload, ecpu, perEvent(usage.server), ecpu/perEvent(usage.server))
		}
	}
	if usage.server > 0 {
		fmt.Fprintf(w, "server CPU\t%.2f cores of %d (%.1f µs per event); load driver %.2f cores\n", usage.server/secs,
			runtime.NumCPU(), perEvent(usage.server), usage.driver/secs)
	}
	if pg != nil {
		fmt.Fprintf(w, "PostgreSQL CPU\t%.2f cores (%.1f µs per event): backends %.2f, WAL writer + checkpointer + bgwriter %.2f\n",
			(usage.pgBackends+usage.pgAux)/secs, perEvent(usage.pgBackends+usage.pgAux), usage.pgBackends/secs, usage.pgAux/secs)
	}
	if usage.machine > 0 {
		fmt.Fprintf(w, "machine busy\t%.2f of %d cores (%.2f in I/O wait)\n", usage.machine/secs, runtime.NumCPU(), usage.iowait/secs)
	}
	if catchErr != nil {
		fmt.Fprintf(w, "loader backlog at the end\tunknown: %v\n", catchErr)
	} else {
		fmt.Fprintf(w, "loader backlog at the end\t%s until an export saw every acknowledged event\n", catchUp.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "errors by status\t%s\n", m.errorText())
	if m.exhausted {
		fmt.Fprintf(w, "note\tran out of pre-generated payloads before -duration; rate is over the time used\n")
	}
	fmt.Fprintf(w, "decode-only, 1 core\t%.0f events/s (encoding/json into []map[string]any)\n", decodeRate)
	fmt.Fprintf(w, "ours ÷ decode-only\t%.2f\n", ours/decodeRate)
	total := o.preload + m.events
	if empty != nil {
		total += empty.events
	}
	if o.restart != "" {
		fmt.Fprintf(w, "restart to listening\t%s after SIG%s (%d events stored)\n", restartTook.Round(time.Millisecond), strings.ToUpper(o.restart), o.preload)
		fmt.Fprintf(w, "server peak RSS before restart\t%d MiB\n", preloadPeakKB>>10)
	}
	if check != nil {
		fmt.Fprintf(w, "after the kill: peak RSS (restart + measured phase)\t%d MiB\n", measuredPeakKB>>10)
		fmt.Fprintf(w, "clean restart at the end\t%s after SIGTERM\n", cleanTook.Round(time.Millisecond))
		verdict := "OK"
		if !check.ok() {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "crash check\t%s: %d events acknowledged in the %s before the kill; of all acknowledged, %d missing; %d stored twice or more; %d unknown; %d of %d unacknowledged (in flight) stored\n",
			verdict, crash.acked, crashWindow, check.ackedMissing, check.duplicated, check.unknown, check.unackedStored, check.unackedSent)
	}
	switch {
	case o.live > 0:
		fmt.Fprintf(w, "event times\tpreload in time order over %s, measured at random in the last %s\n", o.span-o.live, o.live)
	case o.span != 6*time.Hour:
		fmt.Fprintf(w, "event times\tat random over %s\n", o.span)
	}
	if o.dup > 0 {
		fmt.Fprintf(w, "re-sent duplicates\t%.0f%% of events\n", 100*o.dup)
	}
	for i, srv := range srvs {
		if kb, err := srv.status("VmHWM"); err == nil && check == nil {
			fmt.Fprintf(w, "server %d peak RSS\t%d MiB\n", i+1, kb>>10)
		}
	}
	switch {
	case pg != nil:
		if n, err := pg.Size(context.Background()); err == nil {
			fmt.Fprintf(w, "store on disk\t%.1f MB for %d events (%.0f bytes/event, the database)\n", float64(n)/1e6, total, float64(n)/float64(max(total, 1)))
		}
	case len(srvs) == 1:
		if n, err := dirSize(srvs[0].Dir); err == nil {
			fmt.Fprintf(w, "store on disk\t%.1f MB for %d events (%.0f bytes/event)\n", float64(n)/1e6, total, float64(n)/float64(max(total, 1)))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if check != nil && !check.ok() {
		return errors.New("crash check failed: acknowledged events lost or stored twice")
	}
	return nil
}
