package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// freeLoopback returns a loopback address that was free a moment ago, for
// the started server's --pprof listener (the server logs the address it
// bound only at info level, which the child config turns off).
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick pprof port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("pick pprof port: %w", err)
	}
	return addr, nil
}

// captureProfile fetches a CPU profile of secs seconds from the server's
// pprof listener into path; it runs beside the measured phase so the
// profile shows the server at saturation, not at the preload.
func captureProfile(pprofAddr, path string, secs int) <-chan error {
	done := make(chan error, 1)
	go func() {
		c := &http.Client{Timeout: time.Duration(secs+60) * time.Second}
		resp, err := c.Get("http://" + pprofAddr + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
		if err != nil {
			done <- fmt.Errorf("cpu profile: %w", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("cpu profile: HTTP %d", resp.StatusCode)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- fmt.Errorf("cpu profile: %w", err)
			return
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			f.Close()
			done <- fmt.Errorf("cpu profile: %w", err)
			return
		}
		done <- f.Close()
	}()
	return done
}

// timeline counts acknowledged events per second of the measured phase,
// so a stall (a second with few acknowledgements) is visible, not just
// folded into the average.
type timeline struct {
	start time.Time
	secs  []atomic.Int64
}

func newTimeline(start time.Time, d time.Duration) *timeline {
	return &timeline{start: start, secs: make([]atomic.Int64, int(d/time.Second)+3)}
}

func (t *timeline) add(events int) {
	i := int(time.Since(t.start) / time.Second)
	if i >= 0 && i < len(t.secs) {
		t.secs[i].Add(int64(events))
	}
}

// String lists thousands of events acknowledged per second.
func (t *timeline) String() string {
	var b strings.Builder
	for i := range t.secs {
		n := t.secs[i].Load()
		if n == 0 && i >= len(t.secs)-3 {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(n/1000, 10))
	}
	return b.String()
}

// waitLoaded times one export of an empty day: the server answers it only
// after every acknowledged write is visible to scans (Store.Sync).
func waitLoaded(c *http.Client, t target) (time.Duration, error) {
	u := t.base + "/api/2.0/export?from_date=2001-01-01&to_date=2001-01-01"
	if t.user != "" {
		u += "&project_id=" + strconv.FormatInt(t.project, 10)
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if t.user != "" {
		req.SetBasicAuth(t.user, t.secret)
	} else {
		req.SetBasicAuth(t.secret, "")
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("export: HTTP %d", resp.StatusCode)
	}
	return time.Since(start), nil
}
