package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The durability test: a 200 from /import means the records survive a
// SIGKILL, and a client that retries whatever was not acknowledged ends with
// every record exactly once.

const (
	crashImporters = 8
	crashBatchSize = 500
	crashBudget    = 2400 // batches; bounds the export that verifies them
	crashKills     = 5
)

// crashBatch generates batch b deterministically, so a retry sends the very
// same records (same dedup keys) without keeping every body in memory.
func crashBatch(b int, baseMs int64) []byte {
	buf := make([]byte, 0, crashBatchSize*150)
	buf = append(buf, '[')
	for k := 0; k < crashBatchSize; k++ {
		if k > 0 {
			buf = append(buf, ',')
		}
		n := int64(b*crashBatchSize + k)
		buf = append(buf, `{"event":"crash","properties":{"time":`...)
		buf = strconv.AppendInt(buf, baseMs+n, 10)
		buf = append(buf, `,"distinct_id":"u`...)
		buf = strconv.AppendInt(buf, n%997, 10)
		buf = append(buf, `","$insert_id":"c-`...)
		buf = strconv.AppendInt(buf, int64(b), 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, int64(k), 10)
		buf = append(buf, `","batch":`...)
		buf = strconv.AppendInt(buf, int64(b), 10)
		buf = append(buf, `,"plan":"pro","amount":12.5}}`...)
	}
	return append(buf, ']')
}

// postBatch reports whether the server acknowledged all records of body.
func postBatch(client *http.Client, base string, body []byte) (ok bool, status int, err error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/import?strict=1", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(mainSecret, "")
	resp, err := client.Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Imported int `json:"num_records_imported"`
	}
	err = json.NewDecoder(resp.Body).Decode(&r)
	return err == nil && resp.StatusCode == http.StatusOK && r.Imported == crashBatchSize, resp.StatusCode, err
}

func TestCrashDurability(t *testing.T) {
	// Not parallel: the kills should land on a busy server, not a starved one.
	start := time.Now()
	s := startServer(t, defaultConfig())
	baseMs := time.Now().Add(-2 * time.Hour).UnixMilli()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: crashImporters}}

	var (
		cur      atomic.Pointer[string] // URL of the live server; nil while it is down
		next     atomic.Int64           // next batch number to send
		stop     atomic.Bool
		acked    [crashBudget]atomic.Bool
		badReply atomic.Int64 // statuses a crash cannot explain (4xx)
		firstBad atomic.Value
		wg       sync.WaitGroup
	)
	u := s.URL
	cur.Store(&u)
	for w := 0; w < crashImporters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				base := cur.Load()
				if base == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				b := int(next.Add(1) - 1)
				if b >= crashBudget {
					return
				}
				ok, status, err := postBatch(client, *base, crashBatch(b, baseMs))
				acked[b].Store(ok)
				if !ok && status >= 400 && status < 500 {
					badReply.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("batch %d: HTTP %d %v", b, status, err))
				}
				// After a failure wait for the next incarnation instead of
				// burning batch numbers against a dead port.
				for !ok && !stop.Load() && cur.Load() == base {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var restarts []time.Duration
	segment := int64(crashBudget / (crashKills + 1))
	for kill := 0; kill < crashKills; kill++ {
		// Kill at a random moment: after a random time, or earlier after a
		// random number of batches, so a fast server is still hit mid-load
		// and the budget cannot run out before the last kill.
		until := time.Now().Add(time.Duration(300+rng.IntN(1700)) * time.Millisecond)
		upTo := next.Load() + segment/2 + rng.Int64N(segment/2)
		for time.Now().Before(until) && next.Load() < upTo {
			time.Sleep(2 * time.Millisecond)
		}
		cur.Store(nil)
		s.Kill()
		t0 := time.Now()
		s.Start()
		restarts = append(restarts, time.Since(t0))
		u := s.URL
		cur.Store(&u)
	}
	time.Sleep(500 * time.Millisecond) // let the last incarnation take some load too
	stop.Store(true)
	wg.Wait()
	if badReply.Load() > 0 {
		t.Errorf("%d batches got a 4xx during the crashes; first: %v", badReply.Load(), firstBad.Load())
	}

	// Before any retry: an acknowledged batch must be there in full, and an
	// unacknowledged one in full or not at all (one request, one transaction).
	sent := min(int(next.Load()), crashBudget)
	before := scanCrashExport(t, s, sent, baseMs)
	var retry []int
	lost, partial, survived := 0, 0, 0
	for b := 0; b < sent; b++ {
		n, ok := before.perBatch[b], acked[b].Load()
		switch {
		case ok && n != crashBatchSize:
			lost++
		case !ok && n == crashBatchSize:
			survived++ // committed, but the kill ate the 200
		case n != 0 && n != crashBatchSize:
			partial++
		}
		if !ok {
			retry = append(retry, b)
		}
	}
	if lost > 0 || partial > 0 || before.dups > 0 || before.foreign > 0 {
		t.Errorf("DURABILITY after %d kills: %d acknowledged batches incomplete, %d batches partially stored, %d duplicate and %d unexpected lines",
			len(restarts), lost, partial, before.dups, before.foreign)
	}

	// A real client retries every batch it has no 200 for.
	var retryFailed atomic.Int64
	jobs := make(chan int)
	for w := 0; w < crashImporters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range jobs {
				ok := false
				for attempt := 0; attempt < 3 && !ok; attempt++ {
					ok, _, _ = postBatch(client, s.URL, crashBatch(b, baseMs))
				}
				if !ok {
					retryFailed.Add(1)
				}
			}
		}()
	}
	for _, b := range retry {
		jobs <- b
	}
	close(jobs)
	wg.Wait()
	if retryFailed.Load() > 0 {
		t.Fatalf("%d retried batches were not acknowledged by the final server", retryFailed.Load())
	}

	after := scanCrashExport(t, s, sent, baseMs)
	missing := 0
	for _, n := range after.perBatch {
		missing += crashBatchSize - n
	}
	t.Logf("crash test: %d kills (restarts took %v); %d batches × %d records sent, %d acknowledged, %d not "+
		"(%d of those had been stored in full, %d not at all); after retries: export %d lines in %s, "+
		"duplicates %d, missing %d, unexpected %d; test took %s",
		len(restarts), restarts, sent, crashBatchSize, sent-len(retry), len(retry), survived, len(retry)-survived,
		after.lines, after.took.Round(time.Millisecond), after.dups, missing, after.foreign, time.Since(start).Round(time.Millisecond))
	if after.dups > 0 || missing > 0 || after.foreign > 0 || after.lines != sent*crashBatchSize {
		t.Errorf("export after retries: %d lines, want exactly %d (duplicates %d, missing %d, unexpected %d)",
			after.lines, sent*crashBatchSize, after.dups, missing, after.foreign)
	}
}

type crashScan struct {
	perBatch             []int // distinct records of each batch found
	lines, dups, foreign int
	took                 time.Duration
}

// scanCrashExport exports the project and counts the records of each batch.
func scanCrashExport(t *testing.T, s *server, sent int, baseMs int64) crashScan {
	t.Helper()
	start := time.Now()
	r := s.do(t, request{Method: http.MethodGet, Path: "/api/2.0/export", Query: exportQuery(mainID, nil), Auth: asOwner})
	if r.Status != http.StatusOK {
		t.Fatalf("export: %s", r)
	}
	res := crashScan{perBatch: make([]int, sent)}
	seen := make([]bool, sent*crashBatchSize)
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		res.lines++
		b, k, ok := crashID(sc.Bytes())
		switch {
		case !ok || b >= sent || k >= crashBatchSize:
			res.foreign++
		case seen[b*crashBatchSize+k]:
			res.dups++
		default:
			seen[b*crashBatchSize+k] = true
			res.perBatch[b]++
		}
		if res.lines%5000 == 1 { // spot-check whole lines, not just the ids
			checkCrashLine(t, sc.Bytes(), b, k, baseMs)
		}
	}
	res.took = time.Since(start)
	return res
}

// crashID extracts b and k from a line's "$insert_id":"c-B-K".
func crashID(line []byte) (b, k int, ok bool) {
	const key = `"$insert_id":"c-`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0, 0, false
	}
	rest := line[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, 0, false
	}
	bs, ks, found := bytes.Cut(rest[:j], []byte("-"))
	if !found {
		return 0, 0, false
	}
	b, err1 := strconv.Atoi(string(bs))
	k, err2 := strconv.Atoi(string(ks))
	return b, k, err1 == nil && err2 == nil
}

func checkCrashLine(t *testing.T, line []byte, b, k int, baseMs int64) {
	t.Helper()
	var e struct {
		Event      string `json:"event"`
		Properties struct {
			Time       int64   `json:"time"`
			DistinctID string  `json:"distinct_id"`
			Batch      int     `json:"batch"`
			Plan       string  `json:"plan"`
			Amount     float64 `json:"amount"`
		} `json:"properties"`
	}
	n := int64(b*crashBatchSize + k)
	if err := json.Unmarshal(line, &e); err != nil || e.Event != "crash" || e.Properties.Time != (baseMs+n)/1000 ||
		e.Properties.DistinctID != "u"+strconv.FormatInt(n%997, 10) || e.Properties.Batch != b ||
		e.Properties.Plan != "pro" || e.Properties.Amount != 12.5 {
		t.Errorf("exported line does not match what batch %d record %d sent (err %v): %s", b, k, err, line)
	}
}
