package server

import (
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/tributary-dev/tributary/ingest/store/duckstore"
)

func TestNewMemoryBudget(t *testing.T) {
	if b := NewMemoryBudget(0); b != (MemoryBudget{}) || b.duckDBLimit() != "" {
		t.Fatalf("no budget: %+v %q", b, b.duckDBLimit())
	}
	b := NewMemoryBudget(128 << 20)
	if b.DuckDB != 16<<20 || b.GoHeap != 96<<20 || b.LoadChunkBytes != 3<<20 || b.duckDBLimit() != "16384KiB" {
		t.Fatalf("128MB: %+v %q", b, b.duckDBLimit())
	}
	if b.DuckDB+b.GoHeap > b.Total {
		t.Fatalf("shares exceed the budget: %+v", b)
	}
	if b := NewMemoryBudget(64 << 20); b.DuckDB != minDuckDB || b.GoHeap != 48<<20 {
		t.Fatalf("64MB: %+v", b)
	}
	if b := NewMemoryBudget(2 << 30); b.DuckDB != 256<<20 || b.GoHeap != 1536<<20 {
		t.Fatalf("2GB: %+v", b)
	}
}

func TestGoLimitFollowsLiveHeap(t *testing.T) {
	const share = 96 << 20
	for _, tc := range []struct{ live, want int64 }{
		{0, share},
		{60 << 20, share},
		{80 << 20, 100 << 20},
		{200 << 20, 250 << 20},
	} {
		if got := goLimit(share, tc.live); got != tc.want {
			t.Fatalf("live %d MiB: limit %d MiB, want %d", tc.live>>20, got>>20, tc.want>>20)
		}
	}
}

func TestGoShareFitsRSS(t *testing.T) {
	const mib = int64(1 << 20)
	b := NewMemoryBudget(1024 * mib) // GoHeap 768, headroom 64
	for _, tc := range []struct {
		name          string
		rss, goMapped int64
		want          int64
	}{
		{"little outside Go: the whole share", 300 * mib, 250 * mib, 768 * mib},
		{"Bloom filters and DuckDB outside: what is left", 900 * mib, 400 * mib, 460 * mib},
		{"more outside than the budget: the floor", 1500 * mib, 200 * mib, 192 * mib},
		{"RSS below the Go runtime's mappings (not yet touched)", 100 * mib, 300 * mib, 768 * mib},
	} {
		if got := goShare(b, tc.rss, tc.goMapped); got != tc.want {
			t.Errorf("%s: %d MiB, want %d", tc.name, got/mib, tc.want/mib)
		}
	}
	if !b.FitRSS || NewSyncBudget(160*mib).FitRSS {
		t.Fatal("FitRSS is the server's budget's, not a sync's")
	}
}

func TestLimitGoHeapRestores(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(-1)
	stop := LimitGoHeap(NewMemoryBudget(1<<30), slog.New(slog.DiscardHandler))
	if got := debug.SetMemoryLimit(-1); got < 768<<20 {
		t.Fatalf("limit while applied: %d", got)
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Fatalf("limit after stop: %d, want %d", got, prev)
	}
}

func TestNewSyncBudget(t *testing.T) {
	if b := NewSyncBudget(0); b != (MemoryBudget{}) {
		t.Fatalf("no budget: %+v", b)
	}
	b := NewSyncBudget(160 << 20)
	if b.DuckDB != 24<<20 || b.GoHeap != 112<<20 || b.LoadChunkBytes != 112<<20/32 ||
		b.LoadTxnRows != b.RowGroupRows || b.RowGroupRows <= 0 || b.RowGroupRows >= duckstore.RowGroupRows || b.RowGroupRows%2048 != 0 ||
		b.DuckDB+b.GoHeap > b.Total || !b.ReturnFreed || b.LoaderLag != syncLoaderLag {
		t.Fatalf("160MB: %+v", b)
	}
	if b := NewSyncBudget(64 << 20); b.DuckDB < minDuckDB || b.DuckDB+b.GoHeap > b.Total {
		t.Fatalf("64MB: %+v", b)
	}
}

func TestNewMirrorSyncBudget(t *testing.T) {
	if b := NewMirrorSyncBudget(0); b != (MemoryBudget{}) {
		t.Fatalf("no budget: %+v", b)
	}
	b, sync := NewMirrorSyncBudget(160<<20), NewSyncBudget(160<<20)
	if b.DuckDB != 100<<20 || b.GoHeap != 40<<20 || b.LoadChunkBytes != 40<<20/32 || b.DuckDB+b.GoHeap > b.Total ||
		b.LoadTxnRows != sync.LoadTxnRows || b.RowGroupRows != sync.RowGroupRows || b.LoaderLag != sync.LoaderLag || !b.ReturnFreed {
		t.Fatalf("160MB: %+v", b)
	}
}
