package server

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"time"
)

// MemoryBudget splits a process's memory budget (the config's
// memory_limit): an eighth (at least 16MB) is the embedded store's DuckDB
// memory_limit, three quarters the Go heap's soft limit, and the rest is
// left to what DuckDB allocates outside its buffer manager (measured
// during a sync: ~50 MiB plus about its limit again). Resident memory
// also counts the executable's pages (~70-90 MiB). A quarter for DuckDB
// was measured too: peak RSS of a 1M-row sync with a 128MB budget
// 285-303 MiB, against 257-273 MiB with an eighth, at the same rate.
type MemoryBudget struct {
	Total  int64 // 0: no budget; DuckDB's default (80% of RAM), no Go limit
	DuckDB int64 // the store's DuckDB memory_limit
	GoHeap int64 // the Go soft memory limit (LimitGoHeap)
	// LoadChunkBytes bounds the event strings of one loader INSERT, a
	// thirty-second of GoHeap: the loader fills one chunk while DuckDB
	// inserts the other, and a row group of typical events is ~55 MB.
	LoadChunkBytes int
	// LoadTxnRows bounds a loader transaction (0: the store's default);
	// DuckDB holds its rows uncompressed until COMMIT.
	LoadTxnRows int
	// RowGroupRows is the size of the row groups DuckDB writes (0: its
	// default, duckstore.RowGroupRows).
	RowGroupRows int
	// ReturnFreed: DuckDB's allocator gives freed pages back soon
	// (duckstore.Options.ReturnFreedMemory).
	ReturnFreed bool
	// LoaderLag is how far the store's loader may fall behind writes
	// before they slow down (duckstore.Options.LoaderLagBytes; 0: the
	// store's default). Not memory (the log is on disk), but a sync's
	// tuning travels with its budget.
	LoaderLag int64
	// FitRSS lowers the Go heap's soft limit by what the process holds
	// outside the Go runtime beyond DuckDB's share (goShare): the dedup
	// keys' Bloom filters (≈ 1.8 bytes per stored event, 175 MiB at
	// 100 M), DuckDB's allocations outside its buffer manager. The Go
	// share alone let the server's peak RSS pass its 1 GB budget at 100 M
	// stored events.
	FitRSS bool
}

// minDuckDB is DuckDB's least share: room for a checkpoint's blocks.
const minDuckDB = 16 << 20

// NewMemoryBudget splits total bytes (0: no budget).
func NewMemoryBudget(total int64) MemoryBudget {
	if total <= 0 {
		return MemoryBudget{}
	}
	goHeap := total / 4 * 3
	return MemoryBudget{Total: total, DuckDB: max(total/8, minDuckDB), GoHeap: goHeap, LoadChunkBytes: int(goHeap / 32), FitRSS: true}
}

// NewSyncBudget is `tributary sync`'s split of total: three twentieths
// for DuckDB (24 MB of sync's 160MB), seven tenths for the Go heap (with
// three fifths, 96 MB, a 10M-row sync's live heap reached 97 MiB and the
// sync warned that memory_limit was too small), and loader transactions
// of one row group of syncRowGroupRows. A sync is mostly the store's
// loader. DuckDB holds a transaction's rows uncompressed until COMMIT:
// with its own 122,880-row groups that was more than its share, so it
// spilled them to its temp file (ZSTD) and read them back at COMMIT, ≈ 15 %
// of the sync's CPU in perf, and giving it room cost twice the room in
// peak RSS (48 MB: +46 MiB). Since DuckDB's allocator keeps freed pages
// for 100 ms instead of returning them at once (duckstore's freedDecayMs;
// a fifth less CPU where page faults are dear), one transaction's pages
// stay resident into the next.
func NewSyncBudget(total int64) MemoryBudget {
	if total <= 0 {
		return MemoryBudget{}
	}
	goHeap := total / 10 * 7
	return MemoryBudget{Total: total, DuckDB: max(total/20*3, minDuckDB), GoHeap: goHeap, LoadChunkBytes: int(goHeap / 32),
		LoadTxnRows: syncRowGroupRows, RowGroupRows: syncRowGroupRows, ReturnFreed: true,
		LoaderLag: syncLoaderLag}
}

// NewMirrorSyncBudget is `tributary sync`'s split for a Mirror import:
// five eighths for DuckDB (100 MB of 160MB), a quarter for the Go heap
// (whose soft limit follows the live heap when that outgrows it). A
// Mirror run keeps little in Go (the changed rows of one flush), but
// DuckDB 1.5 holds the version info of what it deletes (the replaced
// versions of events) outside what it can spill, also after a
// checkpoint: ≈ 16 KiB for each 2,048-row vector with a deleted row,
// allocated 256 KiB at a time per row group, so ≈ 12 bytes per row of an
// events table whose changes are spread over it (measured at 5M rows:
// 61 MiB). The Mirror state no longer deletes (duckstore's
// mirror_versions.go), which halved that. With half of 160MB for DuckDB
// a 5M-row table's 1 % of updates still failed the run; a larger table
// needs a larger memory_limit.
func NewMirrorSyncBudget(total int64) MemoryBudget {
	b := NewSyncBudget(total)
	if total <= 0 {
		return b
	}
	b.DuckDB = max(total/8*5, minDuckDB)
	b.GoHeap = total / 4
	b.LoadChunkBytes = int(b.GoHeap / 32)
	return b
}

// syncLoaderLag keeps a sync's loader within 16MB of its writes (the
// store's default is 128MB). Whatever lag is left when the source is
// exhausted the loader applies alone, on one core, before the command
// exits: ~0.65 s of a 1M-row sync's 3.8 s with 128MB. A loader that
// kept so close behind would commit a few thousand rows at a time, so
// it gathered whole transactions (every loader now does). The low lag
// with gathering against neither, alternated on syncbench tables, wall time: 1M rows 3.32/3.34/3.39 s
// against 3.78/3.56/3.98 s, 5M rows 16.48/16.34 s against 17.87/16.34 s,
// peak RSS 5-8 MiB lower.
const syncLoaderLag = 16 << 20

// syncRowGroupRows is the row group of a sync, a third of DuckDB's: its
// uncompressed rows fit DuckDB's share, so nothing spills. 5M-row sync,
// user+sys (wall), alternated: 122,880 rows 30.1 / 30.4 s, 61,440 29.5 /
// 29.6 s, 40,960 28.0 / 27.2 s; in a second round 40,960 24.6 / 22.4 s
// (21.2 / 19.0 s) and 20,480 26.0 / 24.9 s (22.7 / 21.1 s). Peak RSS is
// 5 MiB lower than with 122,880. Row groups this size still hold tens of
// thousands of rows, the unit DuckDB parallelises and prunes scans by.
const syncRowGroupRows = 40_960

// duckDBLimit is DuckDB's memory_limit setting, "" for its default.
func (b MemoryBudget) duckDBLimit() string {
	if b.DuckDB <= 0 {
		return ""
	}
	return strconv.FormatInt(b.DuckDB>>10, 10) + "KiB"
}

// liveHeapMetric is the heap the last GC found reachable.
const liveHeapMetric = "/gc/heap/live:bytes"

// LimitGoHeap holds the Go heap to b.GoHeap with a soft memory limit until
// the returned stop is called (stop restores the previous limit). A limit
// below the live heap makes the GC run back to back (measured: a 5M-row
// sync 185k → 89k rows/s once the in-memory dedup keys outgrew it), so
// when the live heap nears the share the limit follows it at live + 25%
// (like GOGC=25; live + 12.5% cost a 5M-row sync 15% more CPU for no
// lower peak), and a warning says that memory_limit is too small.
// GOMEMLIMIT in the environment wins: then nothing is changed.
func LimitGoHeap(b MemoryBudget, log *slog.Logger) (stop func()) {
	if b.GoHeap <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(b.GoHeap)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(ctx, b, log)
	}()
	return func() {
		cancel()
		<-done
		debug.SetMemoryLimit(prev)
	}
}

// follow adjusts the limit to the live heap (and with FitRSS to the
// memory outside Go) until ctx ends.
func follow(ctx context.Context, b MemoryBudget, log *slog.Logger) {
	sample := []metrics.Sample{{Name: liveHeapMetric}, {Name: goTotalMetric}, {Name: goReleasedMetric}}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	limit, warned := b.GoHeap, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // not in this Go version: the plain limit stays
		}
		live := int64(sample[0].Value.Uint64())
		share := b.GoHeap
		if rss, ok := residentBytes(); ok && b.FitRSS && sample[1].Value.Kind() == metrics.KindUint64 {
			share = goShare(b, rss, int64(sample[1].Value.Uint64()-sample[2].Value.Uint64()))
		}
		if want := goLimit(share, live); want != limit {
			debug.SetMemoryLimit(want)
			limit = want
		}
		if live > b.GoHeap && !warned {
			warned = true
			log.Warn("memory_limit is too small: the live Go heap outgrew its share, whose soft limit now follows it",
				"live_mib", live>>20, "go_share_mib", b.GoHeap>>20, "memory_limit_mib", b.Total>>20)
		}
	}
}

// goLimit is the soft limit for a live heap: the share, or live + 25%.
func goLimit(share, live int64) int64 { return max(share, live+live/4) }

const (
	goTotalMetric    = "/memory/classes/total:bytes"
	goReleasedMetric = "/memory/classes/heap/released:bytes"
)

// goShare is the Go heap's share when the process is resident at rss, of
// which goMapped is the Go runtime's (mapped and not released): what is
// left of the budget after the rest of the process and a sixteenth of
// headroom, within [GoHeap/4, GoHeap]. The floor keeps the collector from
// running back to back when DuckDB briefly holds more than its share;
// goLimit still lets the limit follow a live heap above it.
func goShare(b MemoryBudget, rss, goMapped int64) int64 {
	outside := max(rss-goMapped, 0)
	return min(max(b.Total-b.Total/16-outside, b.GoHeap/4), b.GoHeap)
}
