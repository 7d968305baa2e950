package mapping

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestMain doubles as the second process of TestInsertIDStableAcrossProcesses.
func TestMain(m *testing.M) {
	if os.Getenv("TRIBUTARY_MAPPING_CHILD") == "1" {
		w := bufio.NewWriter(os.Stdout)
		for _, id := range idsOf(nil, 3) {
			fmt.Fprintln(w, id)
		}
		w.Flush()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// idsOf maps `batches` bench batches with a fresh Mapper and returns the
// $insert_ids in row order.
func idsOf(tb testing.TB, batches int) []string {
	m := benchMapper(tb)
	var out Records
	var ids []string
	for s := 0; s < batches; s++ {
		rec := benchBatch(1000, int64(s))
		out.Reset()
		m.Map(rec, &out)
		rec.Release()
		for i := 0; i < out.Len(); i++ {
			ids = append(ids, string(out.Key(i)))
		}
	}
	return ids
}

func TestInsertIDStableAcrossRunsAndProcesses(t *testing.T) {
	first, second := idsOf(t, 3), idsOf(t, 3)
	if !slices.Equal(first, second) {
		t.Fatal("two runs derived different $insert_ids for the same rows")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TRIBUTARY_MAPPING_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Fields(string(out))
	if !slices.Equal(first, other) {
		t.Fatalf("another process derived different ids (%d vs %d ids)", len(other), len(first))
	}
	// A run id is a tag, not part of the row: it must not change the id.
	m := benchMapper(t)
	m.opt.RunID = "another-run"
	m.tags = m.tagBytes()
	rec := benchBatch(1000, 0)
	defer rec.Release()
	var r Records
	m.Map(rec, &r)
	if got := string(r.Key(0)); got != first[0] {
		t.Fatalf("run id changed the $insert_id: %s vs %s", got, first[0])
	}
	if !bytes.Contains(r.Record(0), []byte(`"$warehouse_import_job_id":"another-run"`)) {
		t.Fatal("run id tag missing")
	}
}

// TestInsertIDNoCollisions derives ids for 10 M distinct rows of a table
// without a primary key (every column is hashed) and checks they are all
// different. -short maps 1 M.
func TestInsertIDNoCollisions(t *testing.T) {
	rows := 10_000_000
	if testing.Short() {
		rows = 1_000_000
	}
	const batch = 8192
	m := benchMapper(t)
	var out Records
	ids := make([][16]byte, 0, rows)
	for s := 0; len(ids) < rows; s++ {
		rec := benchBatch(batch, int64(s))
		out.Reset()
		m.Map(rec, &out)
		rec.Release()
		for i := 0; i < out.Len() && len(ids) < rows; i++ {
			var k [16]byte
			if _, err := hex.Decode(k[:], bytes.ReplaceAll(out.Key(i), []byte("-"), nil)); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, k)
		}
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("two of %d distinct rows share the $insert_id %x", rows, ids[i])
		}
	}
}

// oracleUUIDText is the byte-at-a-time formatter uuidText replaced.
func oracleUUIDText(h xxh3.Uint128) [36]byte {
	const hexDigits = "0123456789abcdef"
	var b [16]byte
	for k := 0; k < 8; k++ {
		b[k] = byte(h.Hi >> (56 - 8*k))
		b[8+k] = byte(h.Lo >> (56 - 8*k))
	}
	var out [36]byte
	j := 0
	for k, c := range b {
		if k == 4 || k == 6 || k == 8 || k == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hexDigits[c>>4], hexDigits[c&15]
		j += 2
	}
	return out
}

func TestUUIDTextMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for k := 0; k < 100_000; k++ {
		h := xxh3.Uint128{Hi: r.Uint64(), Lo: r.Uint64()}
		if k < 4 {
			h = []xxh3.Uint128{{}, {Hi: ^uint64(0), Lo: ^uint64(0)}, {Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}, {Lo: 1}}[k]
		}
		if got, want := uuidText(h), oracleUUIDText(h); got != want {
			t.Fatalf("uuidText(%x) = %s, want %s", h, got, want)
		}
	}
}
