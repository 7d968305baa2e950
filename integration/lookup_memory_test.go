package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
)

// lookupUploadCeiling bounds how much one lookup-table upload may raise a
// server's peak resident memory, whatever the table's size: uploads stream
// into the store a batch at a time. Measured growth was 111 MiB for a
// 32 MB upload and 132 MiB for a 99 MB one (lookup.UploadMemory says
// where it goes); holding the table whole it was 237 and 473 MiB. The
// ceiling leaves half again for noise, yet sits below what even the
// 32 MB table cost held whole.
const lookupUploadCeiling = 200 << 20

// lookupUploadSpread bounds how much more the 99 MB upload may cost than
// the 32 MB one (measured: 21 MiB; held whole: 236 MiB).
const lookupUploadSpread = 80 << 20

// TestEdgeLookupUploadMemoryBounded: the peak memory a 32 MB and a 99 MB
// lookup-table upload add to a server stay under one fixed ceiling, and
// the big one costs about what the small one does.
func TestEdgeLookupUploadMemoryBounded(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.MemoryLimit = "256MB"
	cfg.Projects[0].LookupTables = []lookupConfig{{ID: "t1", Name: "T1", Property: "item_id"}}
	growth := map[int]int64{}
	for _, mb := range []int{32, 99} {
		var csv bytes.Buffer
		csv.Grow(mb<<20 + 1<<10)
		csv.WriteString("item_id,name,price,active,updated\n")
		for i := 0; csv.Len() < mb<<20-100; i++ {
			fmt.Fprintf(&csv, "key-%09d,Product name %d,%d.%02d,true,2024-01-%02dT00:00:00Z\n", i, i%1000, i%500, i%100, 1+i%28)
		}
		s := startServer(t, cfg)
		base, err := s.procStatus("VmRSS")
		if err != nil {
			t.Fatal(err)
		}
		r := s.do(t, request{Method: http.MethodPut, Path: "/lookup-tables/t1", Query: projectQ(mainID), Auth: asOwner,
			Header: map[string]string{"Content-Type": "text/csv"}, Body: csv.Bytes()})
		if r.Status != http.StatusOK {
			t.Fatalf("upload of %d MB: %s", mb, r)
		}
		peak, err := s.procStatus("VmHWM")
		if err != nil {
			t.Fatal(err)
		}
		growth[mb] = (peak - base) << 10
		t.Logf("upload of %d MiB: resident %d MiB → peak %d MiB (+%d MiB)", csv.Len()>>20, base>>10, peak>>10, (peak-base)>>10)
		if growth[mb] > lookupUploadCeiling {
			t.Errorf("a %d MB upload raised the server's peak memory by %d MiB, over the %d MiB an upload may cost", mb, growth[mb]>>20, lookupUploadCeiling>>20)
		}
	}
	if d := growth[99] - growth[32]; d > lookupUploadSpread {
		t.Errorf("a 99 MB upload cost %d MiB more than a 32 MB one: memory grows with the upload", d>>20)
	}
}
