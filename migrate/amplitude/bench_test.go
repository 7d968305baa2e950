package amplitude

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tributary-dev/tributary/ingest/auth"
	"github.com/tributary-dev/tributary/ingest/store/duckstore"
	"github.com/tributary-dev/tributary/integration/procstat"
	"github.com/tributary-dev/tributary/internal/config"
	"github.com/tributary-dev/tributary/migrate/amplitude/amptest"
)

// benchLine is a realistic export event: every standard field, a handful
// of event and user properties (~1.2 KB).
func benchLine(i int, at time.Time) []byte {
	ts := at.Format("2006-01-02 15:04:05.000000")
	return fmt.Appendf(nil, `{"server_received_time":%q,"app":187520,"device_carrier":"Verizon","$schema":12,"city":"Austin","user_id":"user-%d","uuid":"5d8b4c0e-1a2b-4c3d-9e8f-%012d","event_time":%q,"platform":"iOS","os_version":"17.2","amplitude_id":%d,"processed_time":%q,"user_creation_time":"2024-01-01 00:00:00.000000","version_name":"2.4.1","ip_address":"203.0.113.7","paying":true,"dma":"Austin, TX","group_properties":{},"user_properties":{"plan":"pro","Name":"User %d","cohort":"c%d","signup":"2024-01-%02d"},"client_upload_time":%q,"event_type":"Event %d","library":"amplitude-ios/8.0","device_type":"iPhone 15","device_manufacturer":"Apple","start_version":"2.0.0","location_lng":-97.74,"location_lat":30.27,"server_upload_time":%q,"event_id":%d,"os_name":"ios","device_brand":"Apple","groups":{},"event_properties":{"amount":%d.5,"currency":"USD","screen":"checkout","step":%d,"experiment":"exp-%d"},"data":{},"device_id":"D-%d","language":"English","device_model":"iPhone15,2","country":"US","region":"Texas","is_attribution_event":false,"session_id":1709287200000,"device_family":"Apple iPhone","client_event_time":%q}`,
		ts, i%5000, i, ts, 100000+i%5000, ts, i%5000, i%7, 1+i%28, ts, i%40, ts, i, i%100, i%9, i%3, i%6000, ts)
}

// Transform and /import validation alone, per event.
func BenchmarkTransformValidate(b *testing.B) {
	l := newLoader(newChunkPool(time.Minute), 1, "tok", nil, func() time.Time { return testNow }, 5000)
	lines := make([][]byte, 1000)
	for i := range lines {
		lines[i] = benchLine(i, hour(1, 0).Add(time.Duration(i)*time.Second))
	}
	b.SetBytes(int64(len(lines[0])))
	b.ReportAllocs()
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := l.line(ctx, Location{}, lines[i%len(lines)]); err != nil {
			b.Fatal(err)
		}
	}
	_ = l.flush(ctx)
}

// Export archive → stored events: a whole job of 200,000 events over 24
// hours, against the fake Export API (zip of gzipped NDJSON over HTTP,
// archives built before the timer starts) and the real embedded store,
// profiles of `users` users included. Reports events/s.
//
// store=fresh opens a new store and migration service for every run, as
// `tributary migrate` does in a new process: every buffer of the store,
// of DuckDB and of the service is made anew (the Go heap's pages may
// still be the process's). store=open migrates into a store and a
// service that are already running, as POST /amplitude meets a server's,
// each run a job into a project of its own (the same events into one
// project would be duplicates); the loader's backlog is drained between
// runs, untimed, as store=fresh drains it when it closes the store.
func BenchmarkMigration(b *testing.B) {
	for _, open := range []bool{false, true} {
		for _, users := range []int{100, 5000} {
			name := fmt.Sprintf("store=fresh/users=%d", users)
			if open {
				name = fmt.Sprintf("store=open/users=%d", users)
			}
			b.Run(name, func(b *testing.B) { benchMigration(b, users, open) })
		}
	}
}

func benchMigration(b *testing.B, users int, open bool) {
	const n = 200_000
	srv := amptest.New(testKey, testSecret)
	defer srv.Close()
	srv.PartitionSize, srv.Cache = 20_000, true
	var sample [][]byte // for the yardstick
	for i := range n {
		at := hour(1, 0).Add(time.Duration(i) * (24 * time.Hour / n))
		line := benchLine(i, at)
		line = bytes.Replace(line, fmt.Appendf(nil, `"user_id":"user-%d"`, i%5000), fmt.Appendf(nil, `"user_id":"user-%d"`, i%users), 1)
		srv.AddLine(at, line)
		if i%10 == 0 {
			sample = append(sample, line)
		}
	}
	// One project per run: into an open store the same events twice would
	// be duplicates (a fresh store may reuse projects: runs wrap around).
	const projects = 32
	cfg := &config.Config{Region: config.RegionUS}
	for p := range projects {
		cfg.Projects = append(cfg.Projects, config.Project{ID: int64(p + 1), Token: fmt.Sprintf("tok-%d", p+1),
			Region: config.RegionUS, IDManagement: config.IDSimplified})
	}
	ctx := context.Background()
	openStore := func(dir string) *duckstore.Store {
		st, err := duckstore.Open(ctx, filepath.Join(dir, "t.duckdb"), duckstore.Options{Threads: 1})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	newService := func(st *duckstore.Store, dir string) *Service {
		jobs, _ := NewFileJobStore(filepath.Join(dir, "migrations"))
		svc, err := New(Config{Store: st, Jobs: jobs, Projects: auth.New(cfg, time.Now), Now: func() time.Time { return testNow },
			Logger: slog.New(slog.DiscardHandler), BaseURL: srv.URL, TempDir: dir, EstimateSamples: 1})
		if err != nil {
			b.Fatal(err)
		}
		return svc
	}
	var shared *duckstore.Store
	var sharedSvc *Service
	if open {
		dir := b.TempDir()
		shared = openStore(dir)
		defer shared.Close()
		sharedSvc = newService(shared, dir)
		defer sharedSvc.Close()
	}
	var elapsed time.Duration
	var cpu time.Duration
	var faults int64
	// One untimed run first: the fake server then has every archive the
	// job asks for cached, so the timed runs measure the client and the
	// store, not the fake server's gzip.
	for run := -1; run < b.N; run++ {
		if run == 0 {
			b.ResetTimer()
		}
		b.StopTimer()
		if open && run+1 >= projects {
			b.Fatalf("more than %d runs: raise projects", projects-1)
		}
		st, svc := shared, sharedSvc
		if !open {
			dir := b.TempDir()
			st = openStore(dir)
			svc = newService(st, dir)
		}
		token := fmt.Sprintf("tok-%d", (run+1)%projects+1)
		b.StartTimer()
		began, cpu0, faults0 := time.Now(), procstat.SelfCPU(), minorFaults()
		s, err := svc.Submit(ctx, Request{Credentials: Credentials{testKey, testSecret}, Token: token, StartDate: "2024-03-01", EndDate: "2024-03-01"})
		if err != nil {
			b.Fatal(err)
		}
		if s, err = svc.Wait(ctx, s.ID); err != nil || s.State != Succeeded || s.EventsImported != n || s.ProfilesUpdated != int64(users) {
			b.Fatalf("%v %+v", err, s)
		}
		if run >= 0 {
			elapsed += time.Since(began)
			cpu += procstat.SelfCPU() - cpu0
			faults += minorFaults() - faults0
		}
		b.StopTimer()
		if open {
			if err := st.Sync(ctx); err != nil {
				b.Fatal(err)
			}
		} else {
			svc.Close()
			st.Close()
		}
		b.StartTimer()
	}
	// Over all timed runs, not the last one's alone.
	rate := float64(b.N*n) / elapsed.Seconds()
	b.ReportMetric(rate, "events/s")
	b.StopTimer()
	// The machine's speed drifts between sessions by a third and more; a
	// yardstick measured in the same run tells a slower machine from a
	// slower build (as integration/loadgen's).
	b.ReportMetric(rate/decodeOnly(sample), "÷decode-only")
	// The steadier figure on a shared machine: other processes stretch the
	// wall clock, not this process's CPU time.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/event")
	// A page the process writes for the first time costs a fault, several
	// µs each on a paravirtualised machine: a share of the CPU time that a
	// build can change (buffers kept or sized up front) apart from its code.
	b.ReportMetric(float64(faults)*1000/float64(b.N*n), "faults/kevent")
}

// minorFaults is the page faults this process has taken without I/O.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// decodeOnly is the yardstick: lines/s that one goroutine achieves just
// decoding export lines with encoding/json into maps, for half a second.
func decodeOnly(lines [][]byte) float64 {
	n := 0
	start := time.Now()
	for time.Since(start) < time.Second/2 {
		for _, l := range lines {
			var v map[string]any
			if err := json.Unmarshal(l, &v); err != nil {
				panic(err)
			}
			n++
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// The archive reader alone: a zip of hourly gzipped NDJSON files (as the
// Export API sends) → lines, per byte of uncompressed NDJSON.
func BenchmarkArchiveLines(b *testing.B) {
	var raw int64
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for h := range 4 {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: fmt.Sprintf("187520/187520_2024-03-01_%d#0.json.gz", h), Method: zip.Store})
		if err != nil {
			b.Fatal(err)
		}
		gz := gzip.NewWriter(f)
		for i := range 5000 {
			line := append(benchLine(h*5000+i, hour(1, h)), '\n')
			raw += int64(len(line))
			gz.Write(line)
		}
		if err := gz.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(raw)
	for b.Loop() {
		zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := readZip(zr, func(Location, []byte) error { n++; return nil }); err != nil || n != 20000 {
			b.Fatalf("%d lines, %v", n, err)
		}
	}
}
