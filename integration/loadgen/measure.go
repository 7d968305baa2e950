package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

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

// preload imports o.preload events as fast as the servers take them and
// returns the rate. It gives up after 30 minutes (more for a preload
// above 45 M) so the run is bounded. acked, if not nil, gets the sequence
// numbers of the preloaded events.
// Connection i posts to ts[i % len(ts)], here and in measure.
func preload(c *http.Client, ts []target, gen *generator, o options, acked *bitset) (float64, error) {
	if o.preload <= 0 {
		return 100_000, nil // a guess, only used to size the payload pool
	}
	fmt.Printf("preloading %d events...\n", o.preload)
	var sent, done atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	// At least 25k events/s (100 M: 67 minutes) on a busy machine.
	deadline := start.Add(max(30*time.Minute, time.Duration(o.preload/25_000)*time.Second))
	var wg sync.WaitGroup
	for i := 0; i < o.conns; i++ {
		t := ts[i%len(ts)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && firstErr.Load() == nil {
				prev := sent.Add(int64(o.batch)) - int64(o.batch)
				n := int(min(int64(o.batch), int64(o.preload)-prev))
				if n <= 0 {
					return
				}
				// Every preload batch must be acknowledged (else the run
				// fails), so its events are marked acknowledged up front.
				status, imported, err := t.post(c, gen.batchSeqs(n, acked), false)
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
func measure(c *http.Client, ts []target, payloads [][]byte, o options) *result {
	fmt.Printf("measuring for %s with %d connections...\n", o.duration, o.conns)
	var next atomic.Int64
	var mu sync.Mutex
	res := &result{errs: map[string]int{}}
	start := time.Now()
	end := start.Add(o.duration)
	res.perSec = newTimeline(start, o.duration)
	var wg sync.WaitGroup
	for i := 0; i < o.conns; i++ {
		t := ts[i%len(ts)]
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
