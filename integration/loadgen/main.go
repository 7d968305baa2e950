// Command loadgen measures Tributary's end-to-end ingestion rate.
//
//	go run ./integration/loadgen -bin bin/tributary [-preload 10000000] [-duration 30s] [-conns 16]
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
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
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
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the started server's measured phase to this file")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	tgt := target{project: o.project, user: o.user, secret: o.secret}
	var srv *child
	pprofAddr := ""
	if o.addr == "" {
		var err error
		if o.cpuProfile != "" {
			if pprofAddr, err = freeLoopback(); err != nil {
				return err
			}
		}
		if srv, err = startChild(o.bin, o.memoryLimit, pprofAddr); err != nil {
			return err
		}
		defer srv.stop()
		tgt = target{base: srv.url, project: 1, user: childUser, secret: childSecret}
		fmt.Printf("started %s (pid %d) at %s, data in %s\n", o.bin, srv.cmd.Process.Pid, srv.url, srv.dir)
	} else {
		tgt.base = "http://" + o.addr
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		MaxIdleConnsPerHost: o.conns, DisableCompression: true}}
	gen := newGenerator(time.Now())

	// Preload: generated on the fly (the server's rate here is context, not the headline).
	preRate, err := preload(client, tgt, gen, o)
	if err != nil {
		return err
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
	var cpu0 float64
	if srv != nil {
		cpu0, _ = cpuSeconds(srv.cmd.Process.Pid)
	}
	self0, _ := cpuSeconds(os.Getpid())
	m := measure(client, tgt, payloads, o)
	if srv != nil {
		if cpu1, err := cpuSeconds(srv.cmd.Process.Pid); err == nil {
			m.serverCPU = cpu1 - cpu0
		}
	}
	if self1, err := cpuSeconds(os.Getpid()); err == nil {
		m.driverCPU = self1 - self0
	}
	// Acknowledged is durable in the log; how long until it is all in the
	// tables shows whether the server's background loader kept up.
	catchUp, catchErr := waitLoaded(client, tgt)
	if profDone != nil {
		if err := <-profDone; err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		} else {
			fmt.Printf("server CPU profile of the measured phase: %s\n", o.cpuProfile)
		}
	}
	decodeRate := decodeOnly(raw, o.batch)

	ours := float64(m.events) / m.elapsed.Seconds()
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "measured phase\t%s, %d connections, %d events/request, gzip, strict=1\n", m.elapsed.Round(time.Millisecond), o.conns, o.batch)
	fmt.Fprintf(w, "preload rate\t%.0f events/s (uncompressed, generated on the fly)\n", preRate)
	fmt.Fprintf(w, "accepted + durable (200)\t%.0f events/s (%d events)\n", ours, m.events)
	fmt.Fprintf(w, "requests\t%.1f req/s (%d ok, %d failed)\n", float64(m.requests)/m.elapsed.Seconds(), m.ok, m.requests-m.ok)
	fmt.Fprintf(w, "latency\tp50 %s  p99 %s  max %s\n", m.p(0.50), m.p(0.99), m.p(1))
	fmt.Fprintf(w, "thousand events acked per second\t%s\n", m.perSec)
	if m.serverCPU > 0 {
		fmt.Fprintf(w, "server CPU\t%.2f cores of %d (%.1f µs per event); load driver %.2f cores\n", m.serverCPU/m.elapsed.Seconds(),
			runtime.NumCPU(), 1e6*m.serverCPU/float64(max(m.events, 1)), m.driverCPU/m.elapsed.Seconds())
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
	if srv != nil {
		if kb, err := srv.status("VmHWM"); err == nil {
			fmt.Fprintf(w, "server peak RSS\t%d MiB\n", kb>>10)
		}
		if n, err := dirSize(srv.dir); err == nil {
			total := o.preload + m.events
			fmt.Fprintf(w, "store on disk\t%.1f MB for %d events (%.0f bytes/event)\n", float64(n)/1e6, total, float64(n)/float64(max(total, 1)))
		}
	}
	return w.Flush()
}

type target struct {
	base, user, secret string
	project            int64
}

// post sends one batch and returns the status and records imported.
func (t target) post(c *http.Client, body []byte, gzipped bool) (int, int, error) {
	u := t.base + "/import?strict=1"
	if t.user != "" {
		u += "&project_id=" + strconv.FormatInt(t.project, 10)
	}
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if gzipped {
		req.Header.Set("Content-Encoding", "gzip")
	}
	req.SetBasicAuth(t.user, t.secret)
	if t.user == "" {
		req.SetBasicAuth(t.secret, "")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Imported int `json:"num_records_imported"`
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &r)
	return resp.StatusCode, r.Imported, nil
}

// preload imports o.preload events as fast as the server takes them and
// returns the rate. It gives up after 30 minutes so the run is bounded.
func preload(c *http.Client, t target, gen *generator, o options) (float64, error) {
	if o.preload <= 0 {
		return 100_000, nil // a guess, only used to size the payload pool
	}
	fmt.Printf("preloading %d events...\n", o.preload)
	var sent, done atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(30 * time.Minute)
	var wg sync.WaitGroup
	for i := 0; i < o.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && firstErr.Load() == nil {
				prev := sent.Add(int64(o.batch)) - int64(o.batch)
				n := int(min(int64(o.batch), int64(o.preload)-prev))
				if n <= 0 {
					return
				}
				status, imported, err := t.post(c, gen.batch(n), false)
				if err != nil || status != http.StatusOK {
					firstErr.CompareAndSwap(nil, fmt.Sprintf("preload: HTTP %d, %v", status, err))
					return
				}
				done.Add(int64(imported))
			}
		}()
	}
	tick := time.NewTicker(2 * time.Second)
	fin := make(chan struct{})
	go func() { wg.Wait(); close(fin) }()
	for loop := true; loop; {
		select {
		case <-tick.C:
			d := done.Load()
			fmt.Printf("  %d / %d (%.0f%%), %.0f events/s\n", d, o.preload, 100*float64(d)/float64(o.preload), float64(d)/time.Since(start).Seconds())
		case <-fin:
			loop = false
		}
	}
	tick.Stop()
	if e := firstErr.Load(); e != nil {
		return 0, fmt.Errorf("%v", e)
	}
	rate := float64(done.Load()) / time.Since(start).Seconds()
	fmt.Printf("  preloaded %d events in %s (%.0f events/s)\n", done.Load(), time.Since(start).Round(time.Millisecond), rate)
	return rate, nil
}

type result struct {
	elapsed              time.Duration
	events, requests, ok int
	lat                  []time.Duration
	errs                 map[string]int
	exhausted            bool
	perSec               *timeline
	serverCPU            float64 // seconds the server process used during the phase
	driverCPU            float64 // seconds this process used during the phase
}

func (r *result) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	i := int(q * float64(len(r.lat)-1))
	return r.lat[i].Round(100 * time.Microsecond)
}

func (r *result) errorText() string {
	if len(r.errs) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(r.errs))
	for k := range r.errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s×%d ", k, r.errs[k])
	}
	return s
}

// measure posts the payloads from o.conns workers until the duration is
// over or the payloads run out; each payload is sent once.
func measure(c *http.Client, t target, payloads [][]byte, o options) *result {
	fmt.Printf("measuring for %s with %d connections...\n", o.duration, o.conns)
	var next atomic.Int64
	var mu sync.Mutex
	res := &result{errs: map[string]int{}}
	start := time.Now()
	end := start.Add(o.duration)
	res.perSec = newTimeline(start, o.duration)
	var wg sync.WaitGroup
	for i := 0; i < o.conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			events, reqs, ok := 0, 0, 0
			errs := map[string]int{}
			for time.Now().Before(end) {
				k := int(next.Add(1) - 1)
				if k >= len(payloads) {
					mu.Lock()
					res.exhausted = true
					mu.Unlock()
					break
				}
				t0 := time.Now()
				status, imported, err := t.post(c, payloads[k], true)
				lat = append(lat, time.Since(t0))
				reqs++
				switch {
				case err != nil:
					errs["transport"]++
				case status == http.StatusOK:
					ok++
					events += imported
					res.perSec.add(imported)
				default:
					errs[strconv.Itoa(status)]++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.lat = append(res.lat, lat...)
			res.events, res.requests, res.ok = res.events+events, res.requests+reqs, res.ok+ok
			for k, v := range errs {
				res.errs[k] += v
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	sort.Slice(res.lat, func(i, j int) bool { return res.lat[i] < res.lat[j] })
	return res
}

// decodeOnly is the yardstick: events/s that one goroutine achieves just
// decoding the same uncompressed batches with encoding/json.
func decodeOnly(raw [][]byte, perBatch int) float64 {
	var n int
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		for _, b := range raw {
			var v []map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				panic(err)
			}
			n += len(v)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}
